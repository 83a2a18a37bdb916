package sessionlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// reopeningSQLite is the SQLite store as Open returns it: one open file (sqliteStore) that is
// replaced by a fresh open when
//
//   - the path no longer names the file that was opened (deleted, or replaced by a restore):
//     writes would otherwise go on into an unlinked inode and vanish at the next restart;
//   - a call failed with an error a reopen can cure: a read-only or unopenable file or an
//     I/O error. A connection opened while the file was read-only stays read-only for ever,
//     so without a reopen the store would never recover once the file is writable again.
//
// A reopen never creates a file and accepts only the store that was opened (its identity): a
// deleted file, or one holding another store, fails every call with a *StoreLostError until
// the store is back, so a running manager or agent writes nothing into a new, empty log.
// Calls in flight on the old file when it is closed fail; their callers retry as after any
// store error.
type reopeningSQLite struct {
	path     string
	identity string // of the store that was opened
	mu       sync.RWMutex
	cur      *sqliteStore
	file     os.FileInfo // the file cur opened
}

var _ Store = (*reopeningSQLite)(nil)

func openReopening(ctx context.Context, path string) (*reopeningSQLite, error) {
	cur, err := openSQLiteFile(ctx, path, "")
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		_ = cur.Close()
		return nil, fmt.Errorf("open sqlite session log %s: %w", path, err)
	}
	var id string
	if err := cur.r.QueryRowContext(ctx, identitySelect).Scan(&id); err != nil {
		_ = cur.Close()
		return nil, fmt.Errorf("read the identity of sqlite session log %s: %w", path, err)
	}
	return &reopeningSQLite{path: path, identity: id, cur: cur, file: fi}, nil
}

// store returns the open file, reopening first when the path names another file or none.
func (s *reopeningSQLite) store(ctx context.Context) (*sqliteStore, error) {
	s.mu.RLock()
	cur, file := s.cur, s.file
	s.mu.RUnlock()
	if fi, err := os.Stat(s.path); err == nil && os.SameFile(fi, file) {
		return cur, nil
	}
	return s.reopen(ctx, cur)
}

// reopen replaces old with a fresh open of the path, unless another call already did.
func (s *reopeningSQLite) reopen(ctx context.Context, old *sqliteStore) (*sqliteStore, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != old {
		return s.cur, nil
	}
	nu, err := openSQLiteFile(ctx, s.path, s.identity)
	if err != nil {
		if IsStoreLost(err) {
			return nil, err
		}
		return nil, fmt.Errorf("reopen sqlite session log %s: %w", s.path, err)
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		_ = nu.Close()
		return nil, fmt.Errorf("reopen sqlite session log %s: %w", s.path, err)
	}
	_ = old.Close() // its errors are the reason for the reopen
	s.cur, s.file = nu, fi
	return nu, nil
}

// curable reports a SQLite error that a fresh open of the file can cure.
func curable(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff { // the primary result code of an extended one
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN:
		return true
	}
	return false
}

// call runs f on the open file and reopens after an error a reopen can cure; the error is
// still returned (the caller retries as after any store error).
func reopenCall[T any](ctx context.Context, s *reopeningSQLite, f func(*sqliteStore) (T, error)) (T, error) {
	cur, err := s.store(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := f(cur)
	if err != nil && curable(err) {
		if _, rerr := s.reopen(ctx, cur); rerr != nil {
			return v, errors.Join(err, rerr)
		}
	}
	return v, err
}

func (s *reopeningSQLite) Append(ctx context.Context, sessionID string, events []harness.Event) (harness.Tail, error) {
	return reopenCall(ctx, s, func(c *sqliteStore) (harness.Tail, error) { return c.Append(ctx, sessionID, events) })
}

func (s *reopeningSQLite) Tail(ctx context.Context, sessionID string) (harness.Tail, error) {
	return reopenCall(ctx, s, func(c *sqliteStore) (harness.Tail, error) { return c.Tail(ctx, sessionID) })
}

func (s *reopeningSQLite) ReadFrom(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]harness.Event, error) {
	return reopenCall(ctx, s, func(c *sqliteStore) ([]harness.Event, error) { return c.ReadFrom(ctx, sessionID, fromSeq, limit) })
}

func (s *reopeningSQLite) Fork(ctx context.Context, srcID, dstID string, throughSeq int64, owner Owner) (harness.Tail, error) {
	return reopenCall(ctx, s, func(c *sqliteStore) (harness.Tail, error) { return c.Fork(ctx, srcID, dstID, throughSeq, owner) })
}

func (s *reopeningSQLite) Info(ctx context.Context, sessionID string) (SessionInfo, error) {
	return reopenCall(ctx, s, func(c *sqliteStore) (SessionInfo, error) { return c.Info(ctx, sessionID) })
}

func (s *reopeningSQLite) Seed(ctx context.Context, info SessionInfo, events []harness.Event, owner Owner) (harness.Tail, error) {
	return reopenCall(ctx, s, func(c *sqliteStore) (harness.Tail, error) { return c.Seed(ctx, info, events, owner) })
}

func (s *reopeningSQLite) ClaimOwner(ctx context.Context, sessionID string, owner Owner) (Owner, error) {
	return reopenCall(ctx, s, func(c *sqliteStore) (Owner, error) { return c.ClaimOwner(ctx, sessionID, owner) })
}

func (s *reopeningSQLite) OwnerOf(ctx context.Context, sessionID string) (Owner, bool, error) {
	var found bool
	o, err := reopenCall(ctx, s, func(c *sqliteStore) (Owner, error) {
		o, ok, err := c.OwnerOf(ctx, sessionID)
		found = ok
		return o, err
	})
	return o, found, err
}

func (s *reopeningSQLite) ReleaseOwner(ctx context.Context, sessionID string, holder Owner) error {
	_, err := reopenCall(ctx, s, func(c *sqliteStore) (struct{}, error) { return struct{}{}, c.ReleaseOwner(ctx, sessionID, holder) })
	return err
}

func (s *reopeningSQLite) Identity(ctx context.Context) (string, error) {
	return reopenCall(ctx, s, func(c *sqliteStore) (string, error) { return c.Identity(ctx) })
}

func (s *reopeningSQLite) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.Close()
}
