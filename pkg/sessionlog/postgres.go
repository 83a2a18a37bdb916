package sessionlog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/harness-dev/planmode-operator/pkg/connstr"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// postgresSchemaVersion is the schema this binary writes; older databases are migrated on open.
const postgresSchemaVersion = 1

// postgresMigrateLock is the advisory lock key that serialises schema migration between
// processes opening the same database at once.
const postgresMigrateLock = 0x706c616e6c6f67 // "planlog"

// Data is text, not jsonb: jsonb would reorder keys and rewrite numbers, and the harness's
// JSONL round trip keeps them as written.
var postgresMigrations = []string{
	1: `
CREATE TABLE IF NOT EXISTS sessions (
	session_id          text PRIMARY KEY,
	next_seq            bigint NOT NULL,
	active              boolean NOT NULL,
	last_plan_mode_seq  bigint NOT NULL,
	told                boolean,
	turn_open           boolean NOT NULL,
	turn                bigint NOT NULL,
	last_step_start_seq bigint NOT NULL,
	step                bigint NOT NULL,
	step_open           boolean NOT NULL,
	created_at          bigint NOT NULL,
	parent              text,
	seed_length         bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
	session_id        text NOT NULL,
	seq               bigint NOT NULL,
	type              text NOT NULL,
	time              bigint NOT NULL,
	data              text NOT NULL,
	ignorable         boolean NOT NULL DEFAULT false,
	source_event_seqs text,
	surface_op        text,
	PRIMARY KEY (session_id, seq)
);`,
}

// postgresStore is the cluster backend, shared by the operator and agent pods. Append locks
// the session's tail row (SELECT ... FOR UPDATE) in the same transaction that checks the next
// seq, inserts the events and advances the tail, so concurrent writers serialise on that row
// and every one but the first sees the moved seq and gets a ConflictError.
type postgresStore struct {
	pool *pgxpool.Pool
	// identity of the store that was opened, set once the schema is ready; every connection
	// made after that checks it (checkConnIdentity).
	identity atomic.Pointer[string]
	shown    string // the URL redacted, for errors
	// boundWriteTx sets the write transaction's idle limit (PostgresWriteTxIdleLimit, or
	// WriteIdleLimit's).
	boundWriteTx string
}

var _ Store = (*postgresStore)(nil)

// OpenPostgres connects a pool to the database url names and creates or migrates the schema.
func OpenPostgres(ctx context.Context, url string, opts ...Option) (Store, error) {
	var o openOptions
	for _, f := range opts {
		f(&o)
	}
	cfg, err := parsePostgres(url)
	if err != nil {
		return nil, err
	}
	if o.poolSize > 0 && !setsPoolMaxConns(url) {
		cfg.MaxConns = int32(min(o.poolSize, math.MaxInt32))
	}
	idle := PostgresWriteTxIdleLimit
	if o.writeIdleLimit > 0 {
		idle = o.writeIdleLimit
	}
	s := &postgresStore{shown: connstr.Redact(url), boundWriteTx: pgBoundWriteTx(idle)}
	cfg.AfterConnect = s.checkConnIdentity
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres session log %s: %w", s.shown, err)
	}
	s.pool = pool
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres session log %s: %w", s.shown, err)
	}
	id, err := s.Identity(ctx)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres session log %s: %w", s.shown, err)
	}
	s.identity.Store(&id)
	return s, nil
}

// checkConnIdentity runs on every new connection of the pool: once the store is open, a
// connection that reaches a database with another identity or none (dropped and recreated,
// a failover to another server) is refused with a *StoreLostError, so nothing is written to
// a store that is not the one opened, and no schema is created there.
func (s *postgresStore) checkConnIdentity(ctx context.Context, c *pgx.Conn) error {
	want := s.identity.Load()
	if want == nil {
		return nil // the first connections: Open creates or migrates the schema on them
	}
	var found string
	err := c.QueryRow(ctx, identitySelect).Scan(&found)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		return &StoreLostError{Store: s.shown, Opened: *want, Reason: "the database holds no session log (it was dropped and created again, or is another database)"}
	case errors.Is(err, pgx.ErrNoRows):
		return &StoreLostError{Store: s.shown, Opened: *want, Reason: "the database holds no store identity"}
	case err != nil:
		return err
	case found != *want:
		return &StoreLostError{Store: s.shown, Opened: *want, Found: found}
	}
	return nil
}

func (s *postgresStore) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(postgresMigrateLock)); err != nil {
			return fmt.Errorf("lock schema: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)`); err != nil {
			return fmt.Errorf("create schema_version: %w", err)
		}
		var v *int
		if err := tx.QueryRow(ctx, `SELECT max(version) FROM schema_version`).Scan(&v); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		cur := 0
		if v != nil {
			cur = *v
		}
		if cur > postgresSchemaVersion {
			return fmt.Errorf("schema version %d is newer than this binary supports (%d); upgrade the binary", cur, postgresSchemaVersion)
		}
		for n := cur + 1; n <= postgresSchemaVersion; n++ {
			if _, err := tx.Exec(ctx, postgresMigrations[n]); err != nil {
				return fmt.Errorf("migrate schema to version %d: %w", n, err)
			}
		}
		if _, err := tx.Exec(ctx, postgresOwnerSchema); err != nil {
			return fmt.Errorf("create the session owner table: %w", err)
		}
		if _, err := tx.Exec(ctx, postgresHeaderSchema); err != nil {
			return fmt.Errorf("create the session header table: %w", err)
		}
		id, err := newStoreID()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, postgresIdentitySchema); err != nil {
			return fmt.Errorf("create the store identity: %w", err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(identityInsert, "$1::text"), id); err != nil {
			return fmt.Errorf("create the store identity: %w", err)
		}
		if cur < postgresSchemaVersion {
			if _, err := tx.Exec(ctx, `DELETE FROM schema_version`); err != nil {
				return fmt.Errorf("record schema version: %w", err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version) VALUES ($1)`, postgresSchemaVersion); err != nil {
				return fmt.Errorf("record schema version: %w", err)
			}
		}
		return nil
	})
}

const pgTailCols = `next_seq, active, last_plan_mode_seq, told, turn_open, turn, last_step_start_seq, step, step_open`

func pgLoadTail(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sessionID string) (harness.Tail, error) {
	t, _, err := pgScanTail(q.QueryRow(ctx, pgTailQuery, sessionID))
	if err != nil {
		return harness.Tail{}, fmt.Errorf("read tail of session %q: %w", sessionID, err)
	}
	return t, nil
}

// pgQueueLockedTail queues the read of a session's tail row, locked until the transaction
// ends (SELECT ... FOR UPDATE); *t and *exists are set when b's results are read, and *read
// once the read has run (so an error of the batch then is the read's).
func pgQueueLockedTail(b *pgx.Batch, sessionID string, t *harness.Tail, exists, read *bool) {
	b.Queue(pgTailQuery+` FOR UPDATE`, sessionID).QueryRow(func(row pgx.Row) error {
		var err error
		*read = true
		*t, *exists, err = pgScanTail(row)
		return err
	})
}

const pgTailQuery = `SELECT ` + pgTailCols + ` FROM sessions WHERE session_id = $1`

// pgScanTail reads a tail row: EmptyTail and false when the session has none. Its callers
// name the session in an error.
func pgScanTail(row pgx.Row) (harness.Tail, bool, error) {
	t := harness.EmptyTail()
	err := row.Scan(&t.NextSeq, &t.Active, &t.LastPlanModeSeq, &t.LastShown, &t.TurnOpen, &t.Turn, &t.LastStepStartSeq, &t.Step, &t.StepOpen)
	if errors.Is(err, pgx.ErrNoRows) {
		return harness.EmptyTail(), false, nil
	}
	if err != nil {
		return harness.Tail{}, false, err
	}
	return t, true, nil
}

func (s *postgresStore) Tail(ctx context.Context, sessionID string) (harness.Tail, error) {
	t, err := pgLoadTail(ctx, s.pool, sessionID)
	return t, err
}

func (s *postgresStore) Append(ctx context.Context, sessionID string, events []harness.Event) (harness.Tail, error) {
	return s.write(ctx, sessionID, nil, events, seedOwnership{})
}

func (s *postgresStore) Seed(ctx context.Context, info SessionInfo, events []harness.Event, owner Owner) (harness.Tail, error) {
	return s.seed(ctx, info, events, seedOwnership{owner: owner})
}

func (s *postgresStore) seed(ctx context.Context, info SessionInfo, events []harness.Event, so seedOwnership) (harness.Tail, error) {
	return s.write(ctx, info.ID, &info, events, so)
}

// write is Append (info nil) and Seed (info set: the session must not exist yet, and so is
// checked and recorded in the same transaction).
func (s *postgresStore) write(ctx context.Context, sessionID string, info *SessionInfo, events []harness.Event, so seedOwnership) (harness.Tail, error) {
	p, err := prepareBatch(sessionID, events)
	if err != nil {
		return harness.Tail{}, err
	}
	if info == nil && len(events) == 0 {
		return s.Tail(ctx, sessionID)
	}
	hdr, parent := newHeader(sessionID, info)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return harness.Tail{}, fmt.Errorf("append to session %q: %w", sessionID, err)
	}
	defer conn.Release()
	var seed *seedOwnership
	if info != nil {
		seed = &so
	}
	t, err := pgWrite(ctx, conn.Conn(), s.boundWriteTx, sessionID, seed, hdr, parent, p)
	if err != nil {
		pgRollback(conn.Conn())
		return harness.Tail{}, err
	}
	return t, nil
}

// PostgresWriteTxIdleLimit is how long the server lets a write transaction sit idle between its
// statements before it ends the session (idle_in_transaction_session_timeout, for that
// transaction only). A writer frozen inside its transaction (a SIGSTOPped or descheduled
// manager) otherwise holds the session's row lock, and every other writer of the session (the
// agent's step/start) waits for it however long it stays frozen; with the limit, the server
// rolls the frozen transaction back and releases the lock after at most this long
// (docs/protocol.md, "Failures and timeouts"). A write's own statements follow one another in
// microseconds to milliseconds.
const PostgresWriteTxIdleLimit = time.Second

// WriteIdleLimit replaces PostgresWriteTxIdleLimit for the store's write transactions. Only a
// process that runs many writers on few cores needs it: the scale benchmark hosts thousands of
// agents in one process, where each agent pod runs one, and a goroutine of it can wait longer
// than a second for a core between its transaction's two round trips. SQLite ignores it.
func WriteIdleLimit(d time.Duration) Option { return func(o *openOptions) { o.writeIdleLimit = d } }

func pgBoundWriteTx(d time.Duration) string {
	return fmt.Sprintf(`SET LOCAL idle_in_transaction_session_timeout = %d`, d.Milliseconds())
}

// pgWrite runs write's transaction in two round trips (three with a COPY for several events)
// rather than one per statement (six): BEGIN, the session row's creation and the locked tail
// read go as one batch; the event's insert, the tail's update and COMMIT as another. Each
// round trip waits for both processes to be scheduled, so fewer round trips make an append
// faster, with writers in parallel too (BenchmarkAppend measures it). The caller rolls back
// on error.
//
// A seed (so set) also checks and records the session's ownership in the first batch.
func pgWrite(ctx context.Context, c *pgx.Conn, boundWriteTx, sessionID string, so *seedOwnership, hdr SessionInfo, parent any, p prepared) (harness.Tail, error) {
	var b pgx.Batch
	b.Queue(`BEGIN`)
	b.Queue(boundWriteTx)
	// Create the tail row if the session is new. A concurrent creator blocks here on the
	// primary key until the first commits (then this does nothing) or rolls back.
	create := b.Queue(`INSERT INTO sessions (session_id, `+pgTailCols+`, created_at, parent, seed_length)
		VALUES ($1, 0, false, -1, NULL, false, 0, -1, 0, false, $2, $3, $4) ON CONFLICT (session_id) DO NOTHING`,
		sessionID, hdr.CreatedAt, parent, hdr.SeedLength)
	var created bool
	create.Exec(func(tag pgconn.CommandTag) error {
		created = tag.RowsAffected() == 1
		return nil
	})
	if hdr.hasHarnessFields() {
		// Written by the creator only: ON CONFLICT keeps the first creator's header.
		b.Queue(postgresInsertHeader, append([]any{sessionID}, hdr.harnessFieldArgs()...)...)
	}
	var (
		t            harness.Tail
		exists, read bool
	)
	pgQueueLockedTail(&b, sessionID, &t, &exists, &read)
	var checkOwnership func() error
	if so != nil {
		pgQueueSeedOwnership(&b, sessionID, *so, &checkOwnership)
	}
	if err := c.SendBatch(ctx, &b).Close(); err != nil {
		step := "begin or create the session row"
		if read {
			step = "read the tail"
			if so != nil {
				step = "read the tail or the owners"
			}
		}
		return harness.Tail{}, fmt.Errorf("append to session %q: %s: %w", sessionID, step, err)
	}
	if !exists {
		return harness.Tail{}, fmt.Errorf("append to session %q: tail row vanished", sessionID)
	}
	if so != nil && !created {
		return harness.Tail{}, &ConflictError{SessionID: sessionID, Expected: t.NextSeq, Got: 0}
	}
	if checkOwnership != nil {
		if err := checkOwnership(); err != nil {
			return harness.Tail{}, err
		}
	}
	first := t.NextSeq
	if len(p.events) > 0 {
		first = p.events[0].Seq
	}
	if first != t.NextSeq {
		return harness.Tail{}, &ConflictError{SessionID: sessionID, Expected: t.NextSeq, Got: first}
	}

	b = pgx.Batch{}
	if len(p.events) == 1 {
		ev := &p.events[0]
		b.Queue(`INSERT INTO events (session_id, seq, type, time, data, ignorable, source_event_seqs, surface_op) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			sessionID, ev.Seq, ev.Type, ev.Time, string(ev.Data), ev.Ignorable, encodeSeqs(ev.SourceEventSeqs), pgSurface(ev))
	} else if len(p.events) > 1 {
		rows := make([][]any, len(p.events))
		for i := range p.events {
			ev := &p.events[i]
			rows[i] = []any{sessionID, ev.Seq, ev.Type, ev.Time, string(ev.Data), ev.Ignorable, encodeSeqs(ev.SourceEventSeqs), pgSurface(ev)}
		}
		if _, err := c.CopyFrom(ctx, pgx.Identifier{"events"},
			[]string{"session_id", "seq", "type", "time", "data", "ignorable", "source_event_seqs", "surface_op"},
			pgx.CopyFromRows(rows)); err != nil {
			return harness.Tail{}, fmt.Errorf("append to session %q: insert seqs %d..%d: %w", sessionID, p.events[0].Seq, p.events[len(p.events)-1].Seq, err)
		}
	}
	for i := range p.events {
		t.Apply(&p.events[i], p.facts[i])
	}
	b.Queue(`UPDATE sessions SET next_seq = $2, active = $3, last_plan_mode_seq = $4, told = $5, turn_open = $6, turn = $7, last_step_start_seq = $8, step = $9, step_open = $10 WHERE session_id = $1`,
		sessionID, t.NextSeq, t.Active, t.LastPlanModeSeq, t.LastShown, t.TurnOpen, t.Turn, t.LastStepStartSeq, t.Step, t.StepOpen)
	b.Queue(`COMMIT`)
	if err := c.SendBatch(ctx, &b).Close(); err != nil {
		if len(p.events) == 1 {
			return harness.Tail{}, fmt.Errorf("append to session %q: insert seq %d, update tail and commit: %w", sessionID, p.events[0].Seq, err)
		}
		return harness.Tail{}, fmt.Errorf("append to session %q: update tail and commit: %w", sessionID, err)
	}
	return t, nil
}

// pgRollback ends a failed write's transaction, if one is open, so the connection goes back to
// the pool clean; a connection that cannot say so is closed, and the pool replaces it.
func pgRollback(c *pgx.Conn) {
	if c.IsClosed() || c.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, `ROLLBACK`); err != nil {
		_ = c.Close(ctx)
	}
}

func pgSurface(ev *harness.Event) any {
	if len(ev.SurfaceOp) == 0 {
		return nil
	}
	return string(ev.SurfaceOp)
}

func (s *postgresStore) ReadFrom(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]harness.Event, error) {
	return pgReadFrom(ctx, s.pool, sessionID, fromSeq, limit)
}

func pgReadFrom(ctx context.Context, pool *pgxpool.Pool, sessionID string, fromSeq int64, limit int) ([]harness.Event, error) {
	if fromSeq < 0 {
		fromSeq = 0
	}
	var out []harness.Event
	// One snapshot, so the rows and the next seq they are checked against agree.
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		t, err := pgLoadTail(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		var lim *int64
		if limit > 0 {
			l := int64(limit)
			lim = &l
		}
		rows, err := tx.Query(ctx, `SELECT seq, type, time, data, ignorable, source_event_seqs, surface_op FROM events
			WHERE session_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3`, sessionID, fromSeq, lim)
		if err != nil {
			return fmt.Errorf("read session %q from seq %d: %w", sessionID, fromSeq, err)
		}
		defer rows.Close()
		for rows.Next() {
			var r rawRow
			if err := rows.Scan(&r.seq, &r.typ, &r.time, &r.data, &r.ignorable, &r.seqs, &r.surfaceOp); err != nil {
				return fmt.Errorf("read session %q from seq %d: %w", sessionID, fromSeq, err)
			}
			ev, err := r.event(sessionID)
			if err != nil {
				return err
			}
			out = append(out, ev)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read session %q from seq %d: %w", sessionID, fromSeq, err)
		}
		return checkRun(sessionID, fromSeq, t.NextSeq, out, limit > 0 && len(out) == limit)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *postgresStore) Fork(ctx context.Context, srcID, dstID string, throughSeq int64, owner Owner) (harness.Tail, error) {
	return fork(ctx, s, srcID, dstID, throughSeq, owner)
}

func (s *postgresStore) Info(ctx context.Context, sessionID string) (SessionInfo, error) {
	info, err := pgInfo(ctx, s.pool, sessionID)
	if err != nil {
		return SessionInfo{}, err
	}
	if err := pgHarnessFields(ctx, s.pool, &info); err != nil {
		return SessionInfo{}, err
	}
	return info, nil
}

func pgInfo(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sessionID string) (SessionInfo, error) {
	info := SessionInfo{ID: sessionID}
	var parent *string
	err := q.QueryRow(ctx, `SELECT created_at, parent, seed_length FROM sessions WHERE session_id = $1`, sessionID).
		Scan(&info.CreatedAt, &parent, &info.SeedLength)
	if errors.Is(err, pgx.ErrNoRows) {
		return SessionInfo{}, fmt.Errorf("session %q: %w", sessionID, ErrNotFound)
	}
	if err != nil {
		return SessionInfo{}, fmt.Errorf("read header of session %q: %w", sessionID, err)
	}
	if parent != nil {
		info.ParentSession = *parent
	}
	return info, nil
}

func (s *postgresStore) Identity(ctx context.Context) (string, error) {
	var id string
	if err := s.pool.QueryRow(ctx, identitySelect).Scan(&id); err != nil {
		return "", fmt.Errorf("read the store identity: %w", err)
	}
	return id, nil
}

func (s *postgresStore) Close() error {
	s.pool.Close()
	return nil
}

// corruptForTest overwrites a stored row's data without validation (tests only).
func (s *postgresStore) corruptForTest(ctx context.Context, sessionID string, seq int64, data string) error {
	_, err := s.pool.Exec(ctx, `UPDATE events SET data = $3 WHERE session_id = $1 AND seq = $2`, sessionID, seq, data)
	return err
}

// deleteForTest removes a stored row (tests only).
func (s *postgresStore) deleteForTest(ctx context.Context, sessionID string, seq int64) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM events WHERE session_id = $1 AND seq = $2`, sessionID, seq)
	return err
}
