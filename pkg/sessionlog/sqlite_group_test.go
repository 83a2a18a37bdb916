package sessionlog

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

func openSQLiteStoreForTest(t *testing.T) *sqliteStore {
	t.Helper()
	s, err := openSQLiteFile(context.Background(), filepath.Join(t.TempDir(), "log.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// queueWhileTurnHeld runs each write in its own goroutine while the writer's turn is held, so
// that all queue in the order given, then lets the next turn take them; it returns each
// write's error.
func queueWhileTurnHeld(t *testing.T, s *sqliteStore, writes ...func() error) []error {
	t.Helper()
	s.writes.turn <- struct{}{} // a turn in progress
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Go(func() { errs[i] = w() })
		for deadline := time.Now().Add(10 * time.Second); ; {
			s.writes.mu.Lock()
			n := len(s.writes.queue)
			s.writes.mu.Unlock()
			if n == i+1 {
				break
			}
			if time.Now().After(deadline) {
				<-s.writes.turn
				t.Fatalf("%d of %d writes queued", n, i+1)
			}
			time.Sleep(time.Millisecond) // polls the queue's length, the condition waited for
		}
	}
	<-s.writes.turn
	wg.Wait()
	return errs
}

// Writes that queue while another writes are written in the next turn in one transaction,
// each in its own savepoint: a conflict fails alone and leaves its log as it was, the others
// commit.
func TestSQLiteWritesQueuedInOneTurnShareOneTransaction(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteStoreForTest(t)
	if _, err := s.Append(ctx, "c", []harness.Event{harness.PlanModeEvent(0, true)}); err != nil {
		t.Fatal(err)
	}
	var txs [2]*sql.Tx
	record := func(i int) func() error {
		return func() error {
			return s.inTx(ctx, "record", func(_ context.Context, tx *sql.Tx) error { txs[i] = tx; return nil })
		}
	}
	errs := queueWhileTurnHeld(t, s,
		record(0),
		func() error {
			_, err := s.Append(ctx, "a", []harness.Event{harness.PlanModeEvent(0, true)})
			return err
		},
		func() error {
			_, err := s.Append(ctx, "c", []harness.Event{harness.PlanModeEvent(5, false)})
			return err
		},
		func() error {
			_, err := s.ClaimOwner(ctx, "d", Owner{Namespace: "ns", Name: "d", UID: "u"})
			return err
		},
		record(1),
	)
	if txs[0] == nil || txs[0] != txs[1] {
		t.Fatalf("the queued writes ran in transactions %p and %p; want one", txs[0], txs[1])
	}
	if errs[1] != nil || errs[3] != nil {
		t.Fatalf("append to a: %v; claim of d: %v; want both written", errs[1], errs[3])
	}
	var conflict *ConflictError
	if !errors.As(errs[2], &conflict) {
		t.Fatalf("append to c at seq 5 = %v; want a conflict", errs[2])
	}
	for id, want := range map[string]int64{"a": 1, "c": 1} {
		if tail, err := s.Tail(ctx, id); err != nil || tail.NextSeq != want {
			t.Fatalf("tail of %s = %+v, %v; want next seq %d", id, tail, err, want)
		}
	}
	if o, ok, err := s.OwnerOf(ctx, "d"); err != nil || !ok || o.Name != "d" {
		t.Fatalf("owner of d = %v, %v, %v", o, ok, err)
	}
}

// A batch that cannot go on (here a write ends its transaction) is written again write by
// write, each in its own transaction: only a write that fails by itself fails, and a write of
// the failed batch commits once.
func TestSQLiteBatchThatFailsIsWrittenAgainWriteByWrite(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteStoreForTest(t)
	var appendTxs, breakerRuns int
	var seen []*sql.Tx
	errs := queueWhileTurnHeld(t, s,
		func() error {
			return s.inTx(ctx, "append", func(ctx context.Context, tx *sql.Tx) error {
				appendTxs++
				seen = append(seen, tx)
				p, err := prepareBatch("a", []harness.Event{harness.PlanModeEvent(0, true)})
				if err == nil {
					_, err = s.writeIn(ctx, tx, "a", nil, p, seedOwnership{})
				}
				return err
			})
		},
		func() error {
			return s.inTx(ctx, "breaker", func(ctx context.Context, tx *sql.Tx) error {
				breakerRuns++
				if breakerRuns > 1 {
					return nil
				}
				if _, err := tx.ExecContext(ctx, `ROLLBACK`); err != nil {
					return err
				}
				return errors.New("ended its transaction")
			})
		},
	)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v; want every write of the failed batch written alone", i, err)
		}
	}
	if appendTxs != 2 || seen[0] == seen[1] || breakerRuns != 2 {
		t.Fatalf("append ran %d times (transactions %v), the breaker %d; want each twice, the second alone", appendTxs, seen, breakerRuns)
	}
	if tail, err := s.Tail(ctx, "a"); err != nil || tail.NextSeq != 1 {
		t.Fatalf("tail of a = %+v, %v; want the append committed once (next seq 1)", tail, err)
	}
}

// A write whose context ends while another turn holds the writer stops waiting, as it would
// for the connection, and leaves the queue: the next turn does not write it.
func TestSQLiteWriteWaitingForTheTurnEndsWithItsContext(t *testing.T) {
	s := openSQLiteStoreForTest(t)
	s.writes.turn <- struct{}{} // a turn in progress
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := s.Append(ctx, "a", []harness.Event{harness.PlanModeEvent(0, true)})
	<-s.writes.turn
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append waiting past its deadline = %v; want the deadline", err)
	}
	s.writes.mu.Lock()
	n := len(s.writes.queue)
	s.writes.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d writes left in the queue; want the abandoned one gone", n)
	}
	if _, err := s.Append(context.Background(), "b", []harness.Event{harness.PlanModeEvent(0, true)}); err != nil {
		t.Fatal(err)
	}
	if tail, err := s.Tail(context.Background(), "a"); err != nil || tail.NextSeq != 0 {
		t.Fatalf("tail of a = %+v, %v; want nothing written", tail, err)
	}
}
