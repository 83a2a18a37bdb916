package sessionlog

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// Each new store gets its own identity, kept across opens; another database has another.
func TestStoreIdentity(t *testing.T) {
	ctx := context.Background()
	for _, b := range []struct{ name, url, other string }{
		{"sqlite", "sqlite://" + filepath.Join(t.TempDir(), "a.db"), "sqlite://" + filepath.Join(t.TempDir(), "b.db")},
		{"postgres", postgresDB(t), postgresDB(t)},
	} {
		t.Run(b.name, func(t *testing.T) {
			id := func(url string) string {
				s, err := Open(ctx, url)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = s.Close() }()
				id, err := s.Identity(ctx)
				if err != nil || len(id) != 32 {
					t.Fatalf("Identity: %q, %v", id, err)
				}
				return id
			}
			first := id(b.url)
			if again := id(b.url); again != first {
				t.Fatalf("reopened store has identity %s, was %s", again, first)
			}
			if other := id(b.other); other == first {
				t.Fatalf("two stores share identity %s", first)
			}
		})
	}
}

func removeSQLite(t *testing.T, path string) {
	t.Helper()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// A SQLite file deleted under a running store: no call creates a new file; every one fails
// with a *StoreLostError naming the way out, so nothing lands in an unlinked file or in a new,
// empty one. A file put back that holds another store is refused the same way; the store's own
// backup put back (same identity) is taken up again.
func TestSQLiteDeletedFileIsNeverRecreated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "log.db")
	s, err := Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := s.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(0, true)}); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "backup.db")
	if _, err := unwrapBackend(s).(*sqliteStore).w.ExecContext(ctx, `VACUUM INTO ?`, backup); err != nil {
		t.Fatal(err)
	}
	removeSQLite(t, path)
	calls := map[string]func() error{
		"Append": func() error {
			_, err := s.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(0, false)})
			return err
		},
		"Tail":       func() error { _, err := s.Tail(ctx, "s"); return err },
		"Identity":   func() error { _, err := s.Identity(ctx); return err },
		"ClaimOwner": func() error { _, err := s.ClaimOwner(ctx, "s", Owner{Namespace: "a", Name: "b", UID: "c"}); return err },
	}
	for name, call := range calls {
		err := call()
		var lost *StoreLostError
		if !errors.As(err, &lost) || lost.Found != "" || !strings.Contains(err.Error(), "its file was deleted") || !strings.Contains(err.Error(), "docs/operations.md") {
			t.Fatalf("%s after the file was deleted: %v, want a *StoreLostError saying so and naming the way out", name, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s created a new file: %v", name, err)
		}
	}

	// Another store at the path (a new manager started on it): refused, naming its identity.
	other, err := Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	otherID, _ := other.Identity(ctx)
	_ = other.Close()
	_, err = s.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(1, false)})
	var lost *StoreLostError
	if !errors.As(err, &lost) || lost.Found != otherID {
		t.Fatalf("append with another store at the path: %v, want a *StoreLostError naming %s", err, otherID)
	}
	if tail, err := Open(ctx, "sqlite://"+path); err == nil {
		if t2, _ := tail.Tail(ctx, "s"); t2.NextSeq != 0 {
			t.Fatalf("the refused append reached the other store: %+v", t2)
		}
		_ = tail.Close()
	}

	// The store's own backup put back: the same identity, taken up again where it was.
	removeSQLite(t, path)
	if err := os.Rename(backup, path); err != nil {
		t.Fatal(err)
	}
	if tail, err := s.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(1, false)}); err != nil || tail.NextSeq != 2 {
		t.Fatalf("append once the backup is back: %+v, %v", tail, err)
	}
}

// A PostgreSQL database dropped and created again under a running store: new connections find
// no session log there and are refused with a *StoreLostError, and no schema is created in it.
func TestPostgresRecreatedDatabaseIsRefused(t *testing.T) {
	ctx := context.Background()
	url := postgresDB(t)
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := s.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(0, true)}); err != nil {
		t.Fatal(err)
	}
	pg := unwrapBackend(s).(*postgresStore)
	pg.pool.Reset() // every connection is made anew from here on, as after a restart of the server
	name := url[strings.LastIndexByte(url, '/')+1 : strings.IndexByte(url, '?')]
	admin, err := pgx.Connect(ctx, pgServer.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(ctx) }()
	for _, q := range []string{"DROP DATABASE " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)", "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	_, err = s.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(1, false)})
	var lost *StoreLostError
	if !errors.As(err, &lost) || !strings.Contains(err.Error(), "holds no session log") {
		t.Fatalf("append to the recreated database: %v, want a *StoreLostError", err)
	}
	// A new store on the recreated database (a restarted manager) has another identity: the
	// old one's connections are refused for that too.
	fresh, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	freshID, _ := fresh.Identity(ctx)
	_ = fresh.Close()
	pg.pool.Reset()
	if _, err := s.Tail(ctx, "s"); !errors.As(err, &lost) || lost.Found != freshID {
		t.Fatalf("tail on the recreated store: %v, want a *StoreLostError naming %s", err, freshID)
	}
}

// setReadOnly makes a file unwritable even for root (which chmod does not stop): chattr +i
// as root, chmod otherwise.
func setReadOnly(t *testing.T, path string, ro bool) {
	t.Helper()
	if os.Geteuid() == 0 {
		flag := map[bool]string{true: "+i", false: "-i"}[ro]
		if out, err := exec.Command("chattr", flag, path).CombinedOutput(); err != nil {
			t.Fatalf("chattr %s %s: %v: %s", flag, path, err, out)
		}
		return
	}
	mode := map[bool]os.FileMode{true: 0o444, false: 0o644}[ro]
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// A restore that puts the file back read-only: the store does not go on writing into the
// file it had open (which the restore unlinked), its writes and its identity probe fail while
// the file is read-only, and it recovers by itself once the file is writable again.
func TestSQLiteReadOnlyFileRecoversOnceWritable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "log.db")
	s, err := Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := s.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(0, true)}); err != nil {
		t.Fatal(err)
	}
	// The backup: a consistent copy taken with VACUUM INTO, restored by rename, read-only.
	backup := filepath.Join(dir, "backup.db")
	if _, err := unwrapBackend(s).(*sqliteStore).w.ExecContext(ctx, `VACUUM INTO ?`, backup); err != nil {
		t.Fatal(err)
	}
	removeSQLite(t, path)
	if err := os.Rename(backup, path); err != nil {
		t.Fatal(err)
	}
	setReadOnly(t, path, true)
	restored := false
	defer func() {
		if !restored {
			setReadOnly(t, path, false)
		}
	}()

	if _, err := s.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(1, false)}); err == nil {
		t.Fatal("an append succeeded while the store's file is read-only: it went to the unlinked file")
	}
	if _, err := s.Identity(ctx); err == nil {
		t.Fatal("the identity probe succeeded while the store's file is read-only")
	}

	setReadOnly(t, path, false)
	restored = true
	if _, err := s.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(1, false)}); err != nil {
		t.Fatalf("append once the file is writable again: %v", err)
	}
	// What was written is in the file on disk, for any other process.
	other, err := Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	if tail, err := other.Tail(ctx, "s"); err != nil || tail.NextSeq != 2 || tail.Active {
		t.Fatalf("tail read by another opener: %+v, %v", tail, err)
	}
}
