package sessionlog

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

// callBound is how long a test waits for a call that should have failed at its deadline
// before it declares the call hung.
const callBound = 10 * time.Second

// returnsWithin runs call and fails the test when it does not return within bound.
func returnsWithin(t *testing.T, bound time.Duration, name string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- call() }()
	select {
	case err := <-done:
		t.Logf("%s returned after %s: %v", name, time.Since(start).Round(time.Millisecond), err)
		return err
	case <-time.After(bound):
		t.Fatalf("%s still blocked after %s: the store call has no deadline", name, bound)
		return nil
	}
}

// A SIGSTOPped PostgreSQL accepts connections and answers nothing. Every call fails with a
// TimeoutError at its deadline, the caller's own earlier deadline is kept, and the store works
// again once the server continues.
func TestHungPostgresFailsEveryCallAtItsDeadline(t *testing.T) {
	srv := pgtest.MustStart(t)
	ctx := context.Background()
	url, err := srv.CreateDatabase(ctx, "hung")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, url, CallTimeout(time.Second), PoolSize(2))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := s.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(0, true)}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	calls := map[string]func() error{
		"Append": func() error {
			_, err := s.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(1, false)})
			return err
		},
		"Tail":     func() error { _, err := s.Tail(ctx, "s"); return err },
		"ReadFrom": func() error { _, err := s.ReadFrom(ctx, "s", 0, 0); return err },
		"Info":     func() error { _, err := s.Info(ctx, "s"); return err },
		"Fork": func() error {
			_, err := s.Fork(ctx, "s", "f", -1, Owner{Namespace: "a", Name: "f", UID: "u"})
			return err
		},
		"Seed": func() error { _, err := s.Seed(ctx, SessionInfo{ID: "n"}, nil, Owner{}); return err },
		"Open": func() error {
			o, err := Open(ctx, url, CallTimeout(time.Second))
			if err == nil {
				_ = o.Close()
			}
			return err
		},
	}
	for name, call := range calls {
		err := returnsWithin(t, callBound, name, call)
		var te *TimeoutError
		if !errors.As(err, &te) || te.Op != name || te.Timeout != time.Second {
			t.Errorf("%s on a hung store: %v, want a TimeoutError of %s after 1s", name, err, name)
		}
	}
	// A caller's earlier deadline is its own: not reported as the store's.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err = returnsWithin(t, callBound, "Tail with the caller's deadline", func() error { _, err := s.Tail(short, "s"); return err })
	cancel()
	if err == nil || IsTimeout(err) {
		t.Errorf("Tail under the caller's 100ms deadline: %v, want the caller's own error", err)
	}

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	tail, err := s.Tail(ctx, "s")
	if err != nil || tail.NextSeq != 1 || !tail.Active {
		t.Fatalf("after the server continued: tail %+v, %v", tail, err)
	}
}

// A SQLite file another process keeps write-locked fails an append at its deadline too.
func TestLockedSQLiteFailsAnAppendAtItsDeadline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := Open(context.Background(), "sqlite://"+path, CallTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	locker, err := sql.Open("sqlite", sqliteDSN(path, "immediate", false))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Close() }()
	tx, err := locker.Begin() // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	err = returnsWithin(t, callBound, "Append", func() error {
		_, err := s.Append(context.Background(), "s", []harness.Event{harness.PlanModeEvent(0, true)})
		return err
	})
	if !IsTimeout(err) {
		t.Fatalf("Append behind another process's lock: %v, want a TimeoutError", err)
	}
}
