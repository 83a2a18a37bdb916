package sessionlog

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

func TestOpenReadOnlyNeverCreatesAFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo.db")
	_, err := OpenReadOnly(ctx, "sqlite://"+missing)
	if err == nil || !strings.Contains(err.Error(), "no SQLite session log at "+missing) {
		t.Fatalf("OpenReadOnly(missing) = %v, want an error naming the path", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("OpenReadOnly created %d files in %s, want none", len(entries), dir)
	}
	if _, err := OpenReadOnly(ctx, "sqlite://"+filepath.Join(dir, "no-such-dir", "x.db")); err == nil {
		t.Fatal("OpenReadOnly in a missing directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "no-such-dir")); err == nil {
		t.Fatal("OpenReadOnly created a directory")
	}
}

func TestOpenReadOnlyReadsAndRefusesWrites(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "log.db")
	rw, err := Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rw.Close() })
	if _, err := rw.Append(ctx, "s1", []harness.Event{testPlanMode(t, 0, true)}); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ro.Close() })
	tail, err := ro.Tail(ctx, "s1")
	if err != nil || !tail.Active || tail.NextSeq != 1 {
		t.Fatalf("read-only Tail = %+v, %v; want active at next seq 1", tail, err)
	}
	if _, err := ro.Append(ctx, "s1", []harness.Event{testPlanMode(t, 1, false)}); err == nil {
		t.Fatal("an append through a read-only store succeeded")
	}
	if got, _ := rw.Tail(ctx, "s1"); got.NextSeq != 1 {
		t.Fatalf("the log changed through a read-only store: next seq %d", got.NextSeq)
	}
}

func TestOpenReadOnlyRefusesANonLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(context.Background(), "sqlite://"+path); err == nil || !strings.Contains(err.Error(), "not a session log") {
		t.Fatalf("OpenReadOnly(text file) = %v, want 'not a session log'", err)
	}
}

func testPlanMode(t *testing.T, seq int64, active bool) harness.Event {
	t.Helper()
	return harness.Sequence(seq, harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: active}))[0]
}
