package sessionlog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	_ "modernc.org/sqlite" // pure-Go SQLite driver, registered as "sqlite"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// sqliteSchemaVersion is the schema this binary writes; older files are migrated on open.
const sqliteSchemaVersion = 1

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
	session_id          TEXT PRIMARY KEY,
	next_seq            INTEGER NOT NULL,
	active              INTEGER NOT NULL,
	last_plan_mode_seq  INTEGER NOT NULL,
	told                INTEGER,
	turn_open           INTEGER NOT NULL,
	turn                INTEGER NOT NULL,
	last_step_start_seq INTEGER NOT NULL,
	step                INTEGER NOT NULL,
	step_open           INTEGER NOT NULL,
	created_at          INTEGER NOT NULL,
	parent              TEXT,
	seed_length         INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
	session_id        TEXT NOT NULL,
	seq               INTEGER NOT NULL,
	type              TEXT NOT NULL,
	time              INTEGER NOT NULL,
	data              TEXT NOT NULL,
	ignorable         INTEGER NOT NULL DEFAULT 0,
	source_event_seqs TEXT,
	surface_op        TEXT,
	PRIMARY KEY (session_id, seq)
);
`

// SQLiteBusyTimeoutMillis is how long a writer waits for another process's write transaction.
const SQLiteBusyTimeoutMillis = 10000

// sqliteStore is the embedded backend. Writes go through one connection opened with
// _txlock=immediate, so every write transaction is BEGIN IMMEDIATE: it takes SQLite's write
// lock before reading the tail, and the seq check and the insert are one atomic step even
// against other processes (which wait up to the busy timeout). Reads use a separate pool;
// WAL lets them run beside the writer.
type sqliteStore struct {
	path string
	w    *sql.DB // single connection, BEGIN IMMEDIATE
	r    *sql.DB // readers, BEGIN DEFERRED

	// The statements of every reconcile's Tail and every Append, prepared once per connection:
	// SQLite otherwise parses and plans each one again per call, a third of a Tail's CPU in
	// the manager's storm profile.
	tailR, tailW, insertEvent, updateTail *sql.Stmt
	// ownerR is OwnerOf's read (every claim reads first), prepared on the readers like tailR:
	// unprepared it was two thirds of a restarted manager's reconcile CPU. Nil in a store opened
	// read-only, whose file may predate the owner table.
	ownerR *sql.Stmt
	// claimW and ownerW are a claim's upsert and its read-back on the writer, prepared once:
	// parsed per claim they were most of a first start's claim CPU (ClaimOwners, docs/performance.md).
	claimW, ownerW *sql.Stmt

	// writes is group commit for appends, seeds and owner claims (sqlite_group.go).
	writes writeGroup

	// noHeaderTable: a file opened read-only that no binary keeping header fields has
	// written (header.go).
	noHeaderTable bool
}

var _ Store = (*sqliteStore)(nil)

// Page cache per connection, in KiB (SQLite's cache_size, negative for KiB), smaller than
// SQLite's default. A reader's cache is dropped whole when another connection (the writer,
// an agent) committed since its last read, and the writer's when an agent did, so under
// writes neither holds much beyond one transaction's pages. What a default-sized cache did
// hold was a start-up's claims and its warm read of every session, for good: the pure-Go
// SQLite allocator keeps the memory it took. Tail and Append run as fast with these sizes
// (BenchmarkTail, BenchmarkAppend); docs/performance.md has the memory.
const (
	sqliteWriterCacheKiB = 512
	sqliteReaderCacheKiB = 256
)

// sqliteDSN names the file at path; mustExist opens it only if it exists (SQLite's mode=rw
// in a file: URI), so a reopen never creates a file. txlock "immediate" is the writer's
// connection, "deferred" a reader's.
func sqliteDSN(path string, txlock string, mustExist bool) string {
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(SQLiteBusyTimeoutMillis))
	q.Set("_journal_mode", "WAL")
	// FULL: the WAL is fsynced at every commit, so an acknowledged append survives a power
	// loss, not only a crash of the process.
	q.Set("_synchronous", "FULL")
	q.Set("_txlock", txlock)
	cache := sqliteReaderCacheKiB
	if txlock == "immediate" {
		cache = sqliteWriterCacheKiB
	}
	q.Set("_pragma", fmt.Sprintf("cache_size(-%d)", cache))
	if mustExist {
		return "file:" + sqliteURIPath(path) + "?mode=rw&" + q.Encode()
	}
	return path + "?" + q.Encode()
}

// sqliteURIPath escapes what a file: URI's path may not hold raw.
func sqliteURIPath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// OpenSQLite opens (creating when missing) the SQLite session log at path. The store reopens
// the file when it was deleted or replaced, or when a write failed in a way a reopen can
// cure (sqlite_reopen.go).
func OpenSQLite(ctx context.Context, path string) (Store, error) {
	return openReopening(ctx, path)
}

// openSQLiteFile opens the file at path once: its handles live until Close. With identity set
// it is a reopen: the file must exist and hold that store identity (else a *StoreLostError),
// and nothing is created or migrated in it.
func openSQLiteFile(ctx context.Context, path, identity string) (*sqliteStore, error) {
	if dir := filepath.Dir(path); dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("open sqlite session log %s: directory %s does not exist; create it first", path, dir)
		}
	}
	reopen := identity != ""
	w, err := sql.Open("sqlite", sqliteDSN(path, "immediate", reopen))
	if err != nil {
		return nil, fmt.Errorf("open sqlite session log %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &sqliteStore{path: path, w: w, writes: newWriteGroup()}
	if reopen {
		err = s.checkIdentity(ctx, identity)
	} else {
		err = s.migrate(ctx)
	}
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", sqliteDSN(path, "deferred", reopen))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open sqlite session log %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	s.r = r
	if err := s.prepare(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open sqlite session log %s: %w", path, err)
	}
	return s, nil
}

const (
	sqliteSelectTail  = `SELECT ` + sqliteTailCols + ` FROM sessions WHERE session_id = ?`
	sqliteInsertEvent = `INSERT INTO events (session_id, seq, type, time, data, ignorable, source_event_seqs, surface_op) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	sqliteUpdateTail  = `UPDATE sessions SET next_seq = ?, active = ?, last_plan_mode_seq = ?, told = ?, turn_open = ?, turn = ?, last_step_start_seq = ?, step = ?, step_open = ? WHERE session_id = ?`
)

func (s *sqliteStore) prepare(ctx context.Context) error {
	for _, p := range []struct {
		stmt  **sql.Stmt
		db    *sql.DB
		query string
	}{{&s.tailR, s.r, sqliteSelectTail}, {&s.tailW, s.w, sqliteSelectTail}, {&s.insertEvent, s.w, sqliteInsertEvent}, {&s.updateTail, s.w, sqliteUpdateTail},
		{&s.ownerR, s.r, sqliteReadOwner}, {&s.claimW, s.w, sqliteClaimOwner}, {&s.ownerW, s.w, sqliteReadOwner}} {
		stmt, err := p.db.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.query, err)
		}
		*p.stmt = stmt
	}
	return nil
}

func (s *sqliteStore) migrate(ctx context.Context) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("open sqlite session log %s: %w", s.path, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, sqliteSchema); err != nil {
		return fmt.Errorf("create sqlite session log schema in %s: %w", s.path, err)
	}
	if _, err := tx.ExecContext(ctx, sqliteOwnerSchema); err != nil {
		return fmt.Errorf("create sqlite session owner table in %s: %w", s.path, err)
	}
	if _, err := tx.ExecContext(ctx, sqliteHeaderSchema); err != nil {
		return fmt.Errorf("create sqlite session header table in %s: %w", s.path, err)
	}
	id, err := newStoreID()
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, sqliteIdentitySchema); err != nil {
		return fmt.Errorf("create the store identity in %s: %w", s.path, err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(identityInsert, "?"), id); err != nil {
		return fmt.Errorf("create the store identity in %s: %w", s.path, err)
	}
	var v int
	switch err := tx.QueryRowContext(ctx, `SELECT max(version) FROM schema_version`).Scan(&sqlNullInt{&v}); {
	case err != nil:
		return fmt.Errorf("read schema version of %s: %w", s.path, err)
	case v > sqliteSchemaVersion:
		return fmt.Errorf("sqlite session log %s has schema version %d; this binary supports up to %d (upgrade the binary)", s.path, v, sqliteSchemaVersion)
	case v < sqliteSchemaVersion:
		// Version 0 is a fresh file; later versions add their migrations here.
		if _, err := tx.ExecContext(ctx, `DELETE FROM schema_version`); err != nil {
			return fmt.Errorf("record schema version in %s: %w", s.path, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (?)`, sqliteSchemaVersion); err != nil {
			return fmt.Errorf("record schema version in %s: %w", s.path, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create sqlite session log schema in %s: %w", s.path, err)
	}
	return nil
}

// sqlNullInt scans a possibly NULL integer into *int (NULL -> 0).
type sqlNullInt struct{ p *int }

func (n *sqlNullInt) Scan(src any) error {
	var ni sql.NullInt64
	if err := ni.Scan(src); err != nil {
		return err
	}
	*n.p = int(ni.Int64)
	return nil
}

const sqliteTailCols = `next_seq, active, last_plan_mode_seq, told, turn_open, turn, last_step_start_seq, step, step_open`

// sqliteLoadTail reads the tail row with stmt (sqliteSelectTail); ok is false for a session
// that does not exist.
func sqliteLoadTail(ctx context.Context, stmt *sql.Stmt, sessionID string) (harness.Tail, bool, error) {
	t := harness.EmptyTail()
	var told sql.NullBool
	err := stmt.QueryRowContext(ctx, sessionID).
		Scan(&t.NextSeq, &t.Active, &t.LastPlanModeSeq, &told, &t.TurnOpen, &t.Turn, &t.LastStepStartSeq, &t.Step, &t.StepOpen)
	if errors.Is(err, sql.ErrNoRows) {
		return harness.EmptyTail(), false, nil
	}
	if err != nil {
		return harness.Tail{}, false, fmt.Errorf("read tail of session %q: %w", sessionID, err)
	}
	if told.Valid {
		b := told.Bool
		t.LastShown = &b
	}
	return t, true, nil
}

func (s *sqliteStore) Tail(ctx context.Context, sessionID string) (harness.Tail, error) {
	t, _, err := sqliteLoadTail(ctx, s.tailR, sessionID)
	return t, err
}

func (s *sqliteStore) Append(ctx context.Context, sessionID string, events []harness.Event) (harness.Tail, error) {
	return s.write(ctx, sessionID, nil, events, seedOwnership{})
}

func (s *sqliteStore) Seed(ctx context.Context, info SessionInfo, events []harness.Event, owner Owner) (harness.Tail, error) {
	return s.seed(ctx, info, events, seedOwnership{owner: owner})
}

func (s *sqliteStore) seed(ctx context.Context, info SessionInfo, events []harness.Event, so seedOwnership) (harness.Tail, error) {
	return s.write(ctx, info.ID, &info, events, so)
}

// write is Append (info nil) and Seed (info set: the session must not exist yet, and so is
// checked and recorded in the same transaction).
func (s *sqliteStore) write(ctx context.Context, sessionID string, info *SessionInfo, events []harness.Event, so seedOwnership) (harness.Tail, error) {
	p, err := prepareBatch(sessionID, events)
	if err != nil {
		return harness.Tail{}, err
	}
	if info == nil && len(events) == 0 {
		return s.Tail(ctx, sessionID)
	}
	var t harness.Tail
	err = s.inTx(ctx, "append to session "+strconv.Quote(sessionID), func(ctx context.Context, tx *sql.Tx) error {
		var err error
		t, err = s.writeIn(ctx, tx, sessionID, info, p, so)
		return err
	})
	if err != nil {
		return harness.Tail{}, err
	}
	return t, nil
}

// writeIn is write's transaction: the batch p checked against the tail and written in tx.
func (s *sqliteStore) writeIn(ctx context.Context, tx *sql.Tx, sessionID string, info *SessionInfo, p prepared, so seedOwnership) (harness.Tail, error) {
	t, exists, err := sqliteLoadTail(ctx, tx.StmtContext(ctx, s.tailW), sessionID)
	if err != nil {
		return harness.Tail{}, err
	}
	first := t.NextSeq
	if len(p.events) > 0 {
		first = p.events[0].Seq
	}
	if info != nil && exists {
		return harness.Tail{}, &ConflictError{SessionID: sessionID, Expected: t.NextSeq, Got: 0}
	}
	if first != t.NextSeq {
		return harness.Tail{}, &ConflictError{SessionID: sessionID, Expected: t.NextSeq, Got: first}
	}
	if info != nil {
		if err := sqliteSeedOwnership(ctx, tx, sessionID, so); err != nil {
			return harness.Tail{}, err
		}
	}
	if err := s.insertEvents(ctx, tx, sessionID, p, &t); err != nil {
		return harness.Tail{}, err
	}
	if err := s.saveTail(ctx, tx, sessionID, info, t, exists); err != nil {
		return harness.Tail{}, fmt.Errorf("append to session %q: update tail: %w", sessionID, err)
	}
	return t, nil
}

// insertEvents inserts the batch's events in tx and applies each to the tail t.
func (s *sqliteStore) insertEvents(ctx context.Context, tx *sql.Tx, sessionID string, p prepared, t *harness.Tail) error {
	if len(p.events) == 0 {
		return nil
	}
	stmt := tx.StmtContext(ctx, s.insertEvent)
	for i := range p.events {
		ev := &p.events[i]
		var surface any
		if len(ev.SurfaceOp) > 0 {
			surface = string(ev.SurfaceOp)
		}
		if _, err := stmt.ExecContext(ctx, sessionID, ev.Seq, ev.Type, ev.Time, string(ev.Data), ev.Ignorable, encodeSeqs(ev.SourceEventSeqs), surface); err != nil {
			return fmt.Errorf("append to session %q: insert seq %d: %w", sessionID, ev.Seq, err)
		}
		t.Apply(ev, p.facts[i])
	}
	return nil
}

// saveTail writes the session row in tx: the tail of an existing session, or a new row with
// the tail and the header (info for Seed, now for a first Append).
func (s *sqliteStore) saveTail(ctx context.Context, tx *sql.Tx, sessionID string, info *SessionInfo, t harness.Tail, exists bool) error {
	var told any
	if t.LastShown != nil {
		told = *t.LastShown
	}
	if exists {
		_, err := tx.StmtContext(ctx, s.updateTail).ExecContext(ctx,
			t.NextSeq, t.Active, t.LastPlanModeSeq, told, t.TurnOpen, t.Turn, t.LastStepStartSeq, t.Step, t.StepOpen, sessionID)
		return err
	}
	hdr, parent := newHeader(sessionID, info)
	_, err := tx.ExecContext(ctx, `INSERT INTO sessions (session_id, `+sqliteTailCols+`, created_at, parent, seed_length) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sessionID, t.NextSeq, t.Active, t.LastPlanModeSeq, told, t.TurnOpen, t.Turn, t.LastStepStartSeq, t.Step, t.StepOpen, hdr.CreatedAt, parent, hdr.SeedLength)
	if err != nil || !hdr.hasHarnessFields() {
		return err
	}
	_, err = tx.ExecContext(ctx, sqliteInsertHeader, append([]any{sessionID}, hdr.harnessFieldArgs()...)...)
	return err
}

func (s *sqliteStore) ReadFrom(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]harness.Event, error) {
	if fromSeq < 0 {
		fromSeq = 0
	}
	// One read transaction, so the rows and the next seq they are checked against agree.
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("read session %q: %w", sessionID, err)
	}
	defer func() { _ = tx.Rollback() }()
	t, _, err := sqliteLoadTail(ctx, tx.StmtContext(ctx, s.tailR), sessionID)
	if err != nil {
		return nil, err
	}
	lim := int64(-1)
	if limit > 0 {
		lim = int64(limit)
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, type, time, data, ignorable, source_event_seqs, surface_op FROM events
		WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?`, sessionID, fromSeq, lim)
	if err != nil {
		return nil, fmt.Errorf("read session %q from seq %d: %w", sessionID, fromSeq, err)
	}
	defer func() { _ = rows.Close() }()
	var out []harness.Event
	for rows.Next() {
		var r rawRow
		if err := rows.Scan(&r.seq, &r.typ, &r.time, &r.data, &r.ignorable, &r.seqs, &r.surfaceOp); err != nil {
			return nil, fmt.Errorf("read session %q from seq %d: %w", sessionID, fromSeq, err)
		}
		ev, err := r.event(sessionID)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read session %q from seq %d: %w", sessionID, fromSeq, err)
	}
	if err := checkRun(sessionID, fromSeq, t.NextSeq, out, limit > 0 && len(out) == limit); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *sqliteStore) Fork(ctx context.Context, srcID, dstID string, throughSeq int64, owner Owner) (harness.Tail, error) {
	return fork(ctx, s, srcID, dstID, throughSeq, owner)
}

func (s *sqliteStore) Info(ctx context.Context, sessionID string) (SessionInfo, error) {
	info := SessionInfo{ID: sessionID}
	var parent sql.NullString
	err := s.r.QueryRowContext(ctx, `SELECT created_at, parent, seed_length FROM sessions WHERE session_id = ?`, sessionID).
		Scan(&info.CreatedAt, &parent, &info.SeedLength)
	if errors.Is(err, sql.ErrNoRows) {
		return SessionInfo{}, fmt.Errorf("session %q: %w", sessionID, ErrNotFound)
	}
	if err != nil {
		return SessionInfo{}, fmt.Errorf("read header of session %q: %w", sessionID, err)
	}
	info.ParentSession = parent.String
	if err := s.harnessFields(ctx, &info); err != nil {
		return SessionInfo{}, err
	}
	return info, nil
}

// checkIdentity refuses a file that is not the store with this identity: one that does not
// exist (deleted), or that holds another store or none.
func (s *sqliteStore) checkIdentity(ctx context.Context, want string) error {
	if _, err := os.Stat(s.path); errors.Is(err, fs.ErrNotExist) {
		return &StoreLostError{Store: s.path, Opened: want}
	}
	var found string
	if err := s.w.QueryRowContext(ctx, identitySelect).Scan(&found); err != nil {
		if curable(err) {
			return fmt.Errorf("reopen sqlite session log %s: %w", s.path, err)
		}
		return &StoreLostError{Store: s.path, Opened: want, Reason: "it holds no store identity: " + err.Error()}
	}
	if found != want {
		return &StoreLostError{Store: s.path, Opened: want, Found: found}
	}
	// A file put back read-only is the store, but not one to write to yet: connections
	// opened now would stay read-only, so the reopen waits until the file is writable.
	_, err := s.Identity(ctx)
	return err
}

// Identity reads the identity in a write transaction that writes its row back unchanged (rolled
// back), so it fails while the writer cannot write: a read-only file (BEGIN IMMEDIATE alone
// succeeds on one), or a lock held past the busy timeout.
func (s *sqliteStore) Identity(ctx context.Context) (string, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("sqlite session log %s: begin a write: %w", s.path, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `UPDATE store_identity SET id = id`); err != nil {
		return "", fmt.Errorf("sqlite session log %s: write: %w", s.path, err)
	}
	var id string
	if err := tx.QueryRowContext(ctx, identitySelect).Scan(&id); err != nil {
		return "", fmt.Errorf("read the identity of sqlite session log %s: %w", s.path, err)
	}
	return id, nil
}

func (s *sqliteStore) Close() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{s.tailR, s.tailW, s.insertEvent, s.updateTail, s.ownerR, s.claimW, s.ownerW} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(append(errs, s.r.Close(), s.w.Close())...)
}

// corruptForTest overwrites a stored row's data without validation (tests only).
func (s *sqliteStore) corruptForTest(ctx context.Context, sessionID string, seq int64, data string) error {
	_, err := s.w.ExecContext(ctx, `UPDATE events SET data = ? WHERE session_id = ? AND seq = ?`, data, sessionID, seq)
	return err
}

// deleteForTest removes a stored row (tests only).
func (s *sqliteStore) deleteForTest(ctx context.Context, sessionID string, seq int64) error {
	_, err := s.w.ExecContext(ctx, `DELETE FROM events WHERE session_id = ? AND seq = ?`, sessionID, seq)
	return err
}
