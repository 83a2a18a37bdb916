package sessionlog

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// A writer frozen inside its own write transaction (a SIGSTOPped manager: its connection stays
// open and it sends nothing more) must not hold another writer of the session past a bound
// where the store allows one. PostgreSQL: the server ends the frozen transaction after
// PostgresWriteTxIdleLimit, and the other writer's append then goes through. SQLite: the
// frozen writer holds the file's write lock, and the other writer waits at most the busy
// timeout, then fails (the exception docs/protocol.md states).

// frozenSlack is how long past the server's limit the other writer's append may take on
// PostgreSQL: room for a loaded machine's scheduling.
const frozenSlack = time.Second

func TestFrozenWriterPostgres(t *testing.T) {
	t.Run("the default limit", func(t *testing.T) { frozenWriterPostgres(t, PostgresWriteTxIdleLimit) })
	// WriteIdleLimit moves the limit, both ways of the bound: the frozen writer holds the row
	// at least as long, and no longer.
	const longer = 2500 * time.Millisecond
	t.Run("WriteIdleLimit", func(t *testing.T) { frozenWriterPostgres(t, longer, WriteIdleLimit(longer)) })
}

func frozenWriterPostgres(t *testing.T, limit time.Duration, opts ...Option) {
	ctx := context.Background()
	url := postgresDB(t)
	manager, err := Open(ctx, url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = manager.Close(); _ = agent.Close() }()
	const id = "frozen"
	mustAppend(t, agent, id, ev(harness.TypeTurnStart, `{"turn":1}`))

	// The manager's write transaction, stopped after it locked the session's row: its first
	// batch as pgWrite sends it, then nothing.
	conn, err := unwrapBackend(manager).(*postgresStore).pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []string{`BEGIN`, unwrapBackend(manager).(*postgresStore).boundWriteTx} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `SELECT next_seq FROM sessions WHERE session_id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()

	// The agent's step/start waits on the row lock until the server ends the frozen
	// transaction.
	tail, err := agent.Append(ctx, id, harness.Sequence(1, ev(harness.TypeStepStart, `{"turn":1,"step":1}`)))
	waited := time.Since(frozen)
	if err != nil {
		t.Fatalf("the agent's append failed after %s: %v", waited, err)
	}
	if tail.NextSeq != 2 {
		t.Fatalf("tail after the append: %s", fmtTail(tail))
	}
	if waited > limit+frozenSlack {
		t.Fatalf("the agent's append waited %s for the frozen transaction; bound %s", waited, limit+frozenSlack)
	}
	if waited < limit {
		t.Fatalf("the agent's append went through %s after the manager froze, before the limit %s", waited, limit)
	}
	t.Logf("the agent's append went through %s after the manager froze (limit %s)", waited.Round(time.Millisecond), limit)
	// The frozen transaction was rolled back by the server: its session is gone.
	if _, err := conn.Exec(ctx, `SELECT 1`); err == nil {
		t.Fatal("the frozen transaction's session still answers; the server did not end it")
	}
}

func TestFrozenWriterSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "log.db")
	agent, err := Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = agent.Close() }()
	const id = "frozen"
	mustAppend(t, agent, id, ev(harness.TypeTurnStart, `{"turn":1}`))

	// The manager's write transaction, stopped after BEGIN IMMEDIATE took the write lock.
	manager, err := sql.Open("sqlite", sqliteDSN(path, "immediate", true))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = manager.Close() }()
	tx, err := manager.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `SELECT next_seq FROM sessions WHERE session_id = ?`, id); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	_, err = agent.Append(ctx, id, harness.Sequence(1, ev(harness.TypeStepStart, `{"turn":1,"step":1}`)))
	waited := time.Since(frozen)
	busy := time.Duration(SQLiteBusyTimeoutMillis) * time.Millisecond
	if err == nil {
		t.Fatalf("the agent's append went through while the manager held the write lock (after %s)", waited)
	}
	if waited < busy || waited > busy+5*time.Second {
		t.Fatalf("the agent's append failed after %s; the busy timeout is %s: %v", waited, busy, err)
	}
	t.Logf("with the write lock held, the agent's append failed after %s: %v", waited.Round(time.Millisecond), err)
	// Once the frozen writer is gone, the same append goes through.
	_ = tx.Rollback()
	if _, err := agent.Append(ctx, id, harness.Sequence(1, ev(harness.TypeStepStart, `{"turn":1,"step":1}`))); err != nil {
		t.Fatal(err)
	}
}
