package main

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// The probe follows the store: up while the SQLite writer can write, down while the file is
// read-only, up again once it is writable (the store reopens it); a deleted file is down, a
// lost identity that wakes the reconciler, and is never created again by the store; the file
// put back is the first identity again.
func TestStoreProbeFollowsTheStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "log.db")
	store, err := sessionlog.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	p := newStoreProbe(store, logr.Discard())
	check := func(wantUp float64) {
		t.Helper()
		p.probe(ctx)
		if got := testutil.ToFloat64(p.up); got != wantUp {
			t.Fatalf("planmode_log_store_up = %v, want %v", got, wantUp)
		}
	}
	check(1)
	first := p.StoreID()
	if first == "" {
		t.Fatal("no store identity after a successful probe")
	}

	// A restore renames a read-only copy over the file.
	copyPath := filepath.Join(filepath.Dir(path), "copy.db")
	if out, err := exec.Command("cp", path, copyPath).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if err := os.Rename(copyPath, path); err != nil {
		t.Fatal(err)
	}
	readOnly(t, path, true)
	check(0)
	readOnly(t, path, false)
	check(1)

	// A consistent copy of the store (its identity may still be in the WAL).
	saved := filepath.Join(filepath.Dir(path), "saved.db")
	vacuum, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vacuum.ExecContext(ctx, `VACUUM INTO ?`, saved); err != nil {
		t.Fatal(err)
	}
	_ = vacuum.Close()
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		_ = os.Remove(f)
	}
	check(0)
	if p.StoreID() != lostIdentity(first) {
		t.Fatalf("identity after the file was deleted = %q, want %q", p.StoreID(), lostIdentity(first))
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the probe created a file: %v", err)
	}
	wantWake := func() {
		t.Helper()
		select {
		case <-p.changed:
		default:
			t.Fatal("no event for the reconciler after the identity changed")
		}
	}
	wantWake()
	if err := os.Rename(saved, path); err != nil {
		t.Fatal(err)
	}
	check(1)
	if p.StoreID() != first {
		t.Fatalf("identity after the file was put back = %q, want %q", p.StoreID(), first)
	}
	wantWake()
}

// readOnly makes a file unwritable even for root (chattr +i; chmod does not stop root).
func readOnly(t *testing.T, path string, on bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		mode := map[bool]os.FileMode{true: 0o444, false: 0o644}[on]
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return
	}
	flag := map[bool]string{true: "+i", false: "-i"}[on]
	if out, err := exec.Command("chattr", flag, path).CombinedOutput(); err != nil {
		t.Fatalf("chattr %s: %v: %s", flag, err, out)
	}
	if on {
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", path).Run() })
	}
}
