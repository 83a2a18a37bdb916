package sessionlog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/harness-dev/planmode-operator/pkg/connstr"
)

// OpenReadOnly opens an existing store for tools that only read it (kubectl plan log and
// status, planlog export, plancheck). Nothing is created, migrated or written, so pointing a
// reader at the wrong store changes nothing there, and a role that may only read can use it:
// a SQLite file is opened with SQLite's mode=ro and must exist (a mistyped path is an error
// naming it, never a new empty database); a PostgreSQL database must hold the schema at a
// version this binary reads, and every read runs in a read-only transaction. Writes through
// the returned Store are refused.
func OpenReadOnly(ctx context.Context, url string) (Store, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCallTimeout)
		defer cancel()
	}
	var (
		s   Store
		err error
	)
	switch {
	case strings.HasPrefix(url, "sqlite://"):
		s, err = openReadOnlySQLite(ctx, url)
	case isPostgresURL(url):
		s, err = openReadOnlyPostgres(ctx, url)
	default:
		err = unknownStoreURL(url)
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = &TimeoutError{Op: "Open", Timeout: DefaultCallTimeout, Err: err}
		}
		return nil, connstr.Error(err, url)
	}
	return withDeadlines(s, DefaultCallTimeout), nil
}

func openReadOnlySQLite(ctx context.Context, url string) (Store, error) {
	abs, err := sqlitePath(url)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("no SQLite session log at %s (from %q): check the path; reading never creates one", abs, url)
	case err != nil:
		return nil, fmt.Errorf("open session log %q: %w", url, err)
	case st.IsDir():
		return nil, fmt.Errorf("open session log %q: %s is a directory, not a SQLite file", url, abs)
	}
	return openSQLiteReadOnly(ctx, abs)
}

// sqliteReadOnlyDSN is a file: URI, which SQLite itself parses for mode=ro; the driver reads
// its own _txlock from the same query and SQLite ignores it.
func sqliteReadOnlyDSN(path string) string {
	return fmt.Sprintf("file:%s?mode=ro&_txlock=deferred&_pragma=busy_timeout(%d)&_pragma=cache_size(-%d)", sqliteURIPath(path), SQLiteBusyTimeoutMillis, sqliteReaderCacheKiB)
}

func openSQLiteReadOnly(ctx context.Context, path string) (Store, error) {
	w, err := sql.Open("sqlite", sqliteReadOnlyDSN(path))
	if err != nil {
		return nil, fmt.Errorf("open sqlite session log %s read-only: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite", sqliteReadOnlyDSN(path))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open sqlite session log %s read-only: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	s := &sqliteStore{path: path, w: w, r: r, writes: newWriteGroup()}
	var v int
	if err := r.QueryRowContext(ctx, `SELECT max(version) FROM schema_version`).Scan(&sqlNullInt{&v}); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("%s is not a session log (reading its schema version: %w)", path, err)
	}
	if v > sqliteSchemaVersion {
		_ = s.Close()
		return nil, fmt.Errorf("sqlite session log %s has schema version %d; this binary reads up to %d (upgrade the binary)", path, v, sqliteSchemaVersion)
	}
	has, err := sqliteHasHeaderTable(ctx, r)
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open sqlite session log %s read-only: %w", path, err)
	}
	s.noHeaderTable = !has
	if err := s.prepare(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open sqlite session log %s read-only: %w", path, err)
	}
	return s, nil
}
