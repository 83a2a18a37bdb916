package sessionlog

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// A read-only open of a database that holds no session log (a wrong URL) is an error naming
// the URL, without its password, and the fix; the database is left as it was, with no table.
func TestPostgresOpenReadOnlyNeverCreatesTheSchema(t *testing.T) {
	ctx := context.Background()
	plain := postgresDB(t)
	u, err := url.Parse(plain)
	if err != nil {
		t.Fatal(err)
	}
	// The throwaway server trusts local clients, so the password is never asked for; it is
	// here to show the error does not print it.
	u.User = url.UserPassword(u.User.Username(), "s3cret")
	withPassword := u.String()

	_, err = OpenReadOnly(ctx, withPassword)
	if err == nil {
		t.Fatal("OpenReadOnly of an empty database succeeded")
	}
	msg := err.Error()
	t.Logf("OpenReadOnly(empty database): %s", msg)
	redacted := strings.Replace(withPassword, "s3cret", "xxxxx", 1)
	for _, want := range []string{"no PostgreSQL session log in " + redacted, "check the URL", "reading never creates one"} {
		if !strings.Contains(msg, want) {
			t.Errorf("OpenReadOnly(empty database) = %q, want it to say %q", msg, want)
		}
	}
	if strings.Contains(msg, "s3cret") {
		t.Errorf("the error quotes the password: %q", msg)
	}

	conn, err := pgx.Connect(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables []string
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(tables) != 0 {
		t.Fatalf("OpenReadOnly created tables %v in the database; want none", tables)
	}
}

// A role that may only SELECT (what a log reader is given) reads a log through OpenReadOnly:
// the open neither migrates nor writes the store identity, and writes through the store are
// refused without touching the log.
func TestPostgresOpenReadOnlyWithSelectOnlyGrants(t *testing.T) {
	ctx := context.Background()
	owner := postgresDB(t)
	rw, err := Open(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	mustAppend(t, rw, "s1", testPlanMode(t, 0, true))
	wantID, err := rw.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var db string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	reader := db + "_reader"
	for _, stmt := range []string{
		`CREATE ROLE ` + reader + ` LOGIN`,
		`GRANT CONNECT ON DATABASE ` + db + ` TO ` + reader,
		`REVOKE CREATE ON SCHEMA public FROM PUBLIC`,
		`GRANT USAGE ON SCHEMA public TO ` + reader,
		`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ` + reader,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	u, err := url.Parse(owner)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(reader)

	ro, err := OpenReadOnly(ctx, u.String())
	if err != nil {
		t.Fatalf("OpenReadOnly as a SELECT-only role: %v", err)
	}
	defer ro.Close()
	tail, err := ro.Tail(ctx, "s1")
	if err != nil || !tail.Active || tail.NextSeq != 1 {
		t.Fatalf("read-only Tail = %+v, %v; want active at next seq 1", tail, err)
	}
	if evs, err := ro.ReadFrom(ctx, "s1", 0, 0); err != nil || len(evs) != 1 || evs[0].Type != harness.TypePlanMode {
		t.Fatalf("read-only ReadFrom = %v, %v; want the one plan/mode event", evs, err)
	}
	if _, err := ro.Info(ctx, "s1"); err != nil {
		t.Fatalf("read-only Info: %v", err)
	}
	if id, err := ro.Identity(ctx); err != nil || id != wantID {
		t.Fatalf("read-only Identity = %q, %v; want %q", id, err, wantID)
	}
	if _, err := ro.Append(ctx, "s1", []harness.Event{testPlanMode(t, 1, false)}); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("an append through a read-only store: %v, want a read-only refusal", err)
	}
	if _, err := ro.ClaimOwner(ctx, "s1", Owner{Namespace: "default", Name: "demo", UID: "u1"}); err == nil {
		t.Fatal("a claim through a read-only store succeeded")
	}
	if got, _ := rw.Tail(ctx, "s1"); got.NextSeq != 1 {
		t.Fatalf("the log changed through a read-only store: next seq %d", got.NextSeq)
	}
}
