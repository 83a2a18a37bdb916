package sessionlog

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
)

// writeGroup is group commit for the SQLite store's writes (appends, seeds, owner claims).
// SQLite has one writer, and with synchronous=FULL every commit waits for an fsync of the WAL;
// committed one at a time, a storm's appends queue behind each other's fsyncs. So writes
// queue, and whichever takes the writer's turn first writes every write queued by then in one
// transaction, each in its own savepoint: one BEGIN IMMEDIATE and one fsync'd commit for all,
// while a write that fails (a conflict, a refused claim) rolls back alone. Nothing waits to
// fill a batch: a lone write is written at once, in its own transaction.
//
// A write is acknowledged only after the commit that holds it. When that commit fails, or the
// batch cannot go on, every write of the batch is written again alone, so only a write that
// fails by itself fails.
type writeGroup struct {
	mu    sync.Mutex
	queue []*groupWrite
	turn  chan struct{} // the writer's turn: holds one token while a turn runs
}

func newWriteGroup() writeGroup { return writeGroup{turn: make(chan struct{}, 1)} }

// groupWrite is one write of a group; err, done and batchFailed are set by the writer whose
// batch held it, in its turn.
type groupWrite struct {
	what        string // what the write does, for the errors of its own transaction
	fn          func(context.Context, *sql.Tx) error
	err         error
	done        bool
	batchFailed bool
}

// inTx runs fn in a write transaction of the store's writer, with whatever other writes are
// queued beside it, and returns fn's error or its transaction's (prefixed with what, when
// set). fn may run more than once (a batch that failed is written again write by write), each
// time in a fresh transaction. A caller whose context ends while it waits for the turn stops
// waiting, as it would for a connection: its write is taken out of the queue, or, when a turn
// already holds it, may still commit (what a *TimeoutError says).
func (s *sqliteStore) inTx(ctx context.Context, what string, fn func(context.Context, *sql.Tx) error) error {
	w := &groupWrite{what: what, fn: fn}
	g := &s.writes
	g.mu.Lock()
	g.queue = append(g.queue, w)
	g.mu.Unlock()
	select {
	case g.turn <- struct{}{}:
	case <-ctx.Done():
		g.mu.Lock()
		if i := slices.Index(g.queue, w); i >= 0 {
			g.queue = slices.Delete(g.queue, i, i+1)
		}
		g.mu.Unlock()
		return ctx.Err()
	}
	defer func() { <-g.turn }()
	if !w.done {
		g.mu.Lock()
		batch := g.queue
		g.queue = nil
		g.mu.Unlock()
		s.writeBatch(ctx, batch)
	}
	if w.batchFailed {
		return s.writeAlone(ctx, what, fn)
	}
	return w.err
}

// writeBatch writes batch in one transaction and marks each write done, with its own error or
// as batchFailed. It runs under the context of the caller whose turn it is; when that ends
// the batch fails, and each of the others is written alone under its own.
func (s *sqliteStore) writeBatch(ctx context.Context, batch []*groupWrite) {
	if len(batch) == 1 {
		w := batch[0]
		w.err, w.done = s.writeAlone(ctx, w.what, w.fn), true
		return
	}
	err := s.writeSavepoints(ctx, batch)
	for _, w := range batch {
		w.done, w.batchFailed = true, err != nil
	}
}

func (s *sqliteStore) writeSavepoints(ctx context.Context, batch []*groupWrite) error {
	tx, err := s.w.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see _txlock)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, w := range batch {
		if _, err := tx.ExecContext(ctx, `SAVEPOINT w`); err != nil {
			return err
		}
		if w.err = w.fn(ctx, tx); w.err != nil {
			if err := ctx.Err(); err != nil {
				return err // the turn's caller's context, not w's own failure
			}
			// An error SQLite answers by rolling the whole transaction back leaves no
			// savepoint to return to: the batch fails, and each write goes again alone.
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO w`); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `RELEASE w`); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// writeAlone runs fn in a transaction of its own.
func (s *sqliteStore) writeAlone(ctx context.Context, what string, fn func(context.Context, *sql.Tx) error) error {
	prefix := ""
	if what != "" {
		prefix = what + ": "
	}
	tx, err := s.w.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see _txlock)
	if err != nil {
		return fmt.Errorf("%sbegin: %w", prefix, err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%scommit: %w", prefix, err)
	}
	return nil
}
