package sessionlog

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// A claim of a log the session already owns reads the owner record and writes nothing: it
// completes while another connection holds SQLite's write lock, which a write would wait for.
func TestSQLiteClaimOfAnOwnedLogTakesNoWriteLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	me := Owner{Namespace: "team-a", Name: "demo", UID: "u1"}
	other := Owner{Namespace: "team-b", Name: "demo", UID: "u2"}
	if _, err := s.ClaimOwner(ctx, "s1", me); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.ExecContext(ctx, "ROLLBACK") }()

	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if got, err := s.ClaimOwner(short, "s1", me); err != nil || got != me {
		t.Fatalf("claim by the owner under another writer's lock = %v, %v; want %v without waiting", got, err, me)
	}
	if got, err := s.ClaimOwner(short, "s1", other); err != nil || got != me {
		t.Fatalf("claim by another session under another writer's lock = %v, %v; want the holder %v", got, err, me)
	}
	// A claim that changes the record still writes, so it waits for the lock.
	if _, err := s.ClaimOwner(short, "s2", me); err == nil {
		t.Fatal("a claim of an unowned log completed while another connection held the write lock")
	}
}

// The same on PostgreSQL: a claim that changes nothing assigns no transaction ID.
func TestPostgresClaimOfAnOwnedLogWritesNothing(t *testing.T) {
	ctx := context.Background()
	url := postgresDB(t)
	s, err := OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	me := Owner{Namespace: "team-a", Name: "demo", UID: "u1"}
	if _, err := s.ClaimOwner(ctx, "s1", me); err != nil {
		t.Fatal(err)
	}
	nextXID := func() string {
		t.Helper()
		var x string
		if err := s.(*postgresStore).pool.QueryRow(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text").Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	before := nextXID()
	for range 3 {
		if got, err := s.ClaimOwner(ctx, "s1", me); err != nil || got != me {
			t.Fatalf("claim by the owner = %v, %v; want %v", got, err, me)
		}
	}
	if after := nextXID(); after != before {
		t.Fatalf("claims of an owned log assigned transaction IDs: next ID %s before, %s after", before, after)
	}
	if _, err := s.ClaimOwner(ctx, "s2", me); err != nil {
		t.Fatal(err)
	}
	if after := nextXID(); after == before {
		t.Fatal("the claim of an unowned log assigned no transaction ID: the check above cannot see a write")
	}
}

// Many sessions claimed at once on SQLite (the group commit's batches) each get their own log.
func TestSQLiteConcurrentClaimsEachOwnTheirLog(t *testing.T) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "log.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 64
	errs := make(chan error, n)
	for i := range n {
		go func() {
			me := Owner{Namespace: "ns", Name: fmt.Sprintf("s-%d", i), UID: fmt.Sprintf("u-%d", i)}
			got, err := s.ClaimOwner(ctx, fmt.Sprintf("sid-%d", i%(n/2)), me) // two sessions per log
			if err == nil && got.UID == "" {
				err = fmt.Errorf("claim of %s read back no owner", me)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range n / 2 {
		o, ok, err := s.OwnerOf(ctx, fmt.Sprintf("sid-%d", i))
		if err != nil || !ok {
			t.Fatalf("owner of sid-%d = %v, %v, %v", i, o, ok, err)
		}
		if o.Name != fmt.Sprintf("s-%d", i) && o.Name != fmt.Sprintf("s-%d", i+n/2) {
			t.Fatalf("owner of sid-%d is %s, neither of its claimants", i, o)
		}
	}
}
