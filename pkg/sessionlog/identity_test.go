package sessionlog

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

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

// A SQLite file deleted under a running store: the next call opens a new file with a new
// identity, so an append at the old position is refused (compare-and-swap) instead of landing
// in the unlinked file, and the identity tells readers the log is not the one they knew.
func TestSQLiteDeletedFileIsNoticed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := s.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(0, true)}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	removeSQLite(t, path)
	if _, err := s.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(1, false)}); !IsConflict(err) {
		t.Fatalf("append at seq 1 after the file was deleted: %v, want a seq conflict against the new, empty log", err)
	}
	after, err := s.Identity(ctx)
	if err != nil || after == before {
		t.Fatalf("identity after the file was deleted: %q (was %q), %v", after, before, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the store did not create a new file: %v", err)
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
