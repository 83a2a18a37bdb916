package sessionlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/connstr"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// Open returns the Store a URL names:
//
//	sqlite:///abs/path/log.db   SQLite file at an absolute path (three slashes)
//	sqlite://rel/path/log.db    SQLite file relative to the working directory
//	postgres://user@host:5432/db?sslmode=disable   PostgreSQL (also postgresql://), any
//	                            libpq-style URL pgx accepts, including pool_max_conns
//
// The SQLite file and its -wal/-shm companions are created when missing (the directory must
// exist). Schemas are created or migrated on open.
//
// An error never quotes the URL's password (connstr).
//
// Every call of the returned Store has a deadline (CallTimeout, DefaultCallTimeout), and so
// has Open when ctx has none.
func Open(ctx context.Context, url string, opts ...Option) (Store, error) {
	var o openOptions
	for _, f := range opts {
		f(&o)
	}
	if o.callTimeout <= 0 {
		o.callTimeout = DefaultCallTimeout
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.callTimeout)
		defer cancel()
	}
	s, err := open(ctx, url, opts...)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = &TimeoutError{Op: "Open", Timeout: o.callTimeout, Err: err}
		}
		return nil, connstr.Error(err, url)
	}
	return withDeadlines(s, o.callTimeout), nil
}

func open(ctx context.Context, url string, opts ...Option) (Store, error) {
	switch {
	case strings.HasPrefix(url, "sqlite://"):
		path, err := sqlitePath(url)
		if err != nil {
			return nil, err
		}
		return OpenSQLite(ctx, path)
	case isPostgresURL(url):
		return OpenPostgres(ctx, url, opts...)
	default:
		return nil, unknownStoreURL(url)
	}
}

func isPostgresURL(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

func unknownStoreURL(url string) error {
	return fmt.Errorf("open session log %q: unknown store URL; use sqlite:///abs/path.db, sqlite://relative/path.db or postgres://user@host:port/db", connstr.Redact(url))
}

// Option tunes how Open connects.
type Option func(*openOptions)

type openOptions struct {
	poolSize       int
	callTimeout    time.Duration
	writeIdleLimit time.Duration
}

// PoolSize sizes a PostgreSQL store's connection pool to n when its URL does not set
// pool_max_conns (pgx's own default is 4 or the CPU count, whichever is larger). A process
// that runs n log operations at once (the manager's workers) gives its n-th a connection
// instead of a wait behind another's commit. SQLite ignores it: its one writer serialises
// appends whatever the caller's concurrency.
func PoolSize(n int) Option { return func(o *openOptions) { o.poolSize = n } }

// setsPoolMaxConns reports whether a postgres:// URL sizes its pool itself.
func setsPoolMaxConns(url string) bool {
	u, err := neturl.Parse(url)
	return err == nil && u.Query().Has("pool_max_conns")
}

// encodeSeqs stores sourceEventSeqs as a JSON array, or NULL (nil) when absent.
func encodeSeqs(seqs []int64) any {
	if len(seqs) == 0 {
		return nil
	}
	b, _ := json.Marshal(seqs)
	return string(b)
}

// rawRow is one stored event as read from either backend, before it is checked.
type rawRow struct {
	seq       int64
	typ       string
	time      int64
	data      []byte
	ignorable bool
	seqs      *string
	surfaceOp *string
}

// event turns a stored row into a harness.Event, reporting corruption with session and seq.
func (r rawRow) event(sessionID string) (harness.Event, error) {
	ev := harness.Event{Type: r.typ, Seq: r.seq, Time: r.time, Data: json.RawMessage(r.data), Ignorable: r.ignorable}
	if r.seqs != nil {
		if err := json.Unmarshal([]byte(*r.seqs), &ev.SourceEventSeqs); err != nil {
			return harness.Event{}, &CorruptError{SessionID: sessionID, Seq: r.seq, Reason: "sourceEventSeqs is not a JSON array of integers"}
		}
	}
	if r.surfaceOp != nil {
		ev.SurfaceOp = json.RawMessage(*r.surfaceOp)
	}
	if err := checkStored(sessionID, &ev); err != nil {
		return harness.Event{}, err
	}
	return ev, nil
}

// checkRun verifies that rows read from fromSeq are contiguous and, when the read was not cut
// by a limit, reach the stored next seq: a missing row is corruption, never skipped.
func checkRun(sessionID string, fromSeq, nextSeq int64, events []harness.Event, limited bool) error {
	if fromSeq < 0 {
		fromSeq = 0
	}
	want := fromSeq
	for _, ev := range events {
		if ev.Seq != want {
			return &CorruptError{SessionID: sessionID, Seq: want, Reason: fmt.Sprintf("event missing (next stored row has seq %d)", ev.Seq)}
		}
		want++
	}
	if !limited && want < nextSeq {
		return &CorruptError{SessionID: sessionID, Seq: want, Reason: fmt.Sprintf("event missing (the session's next seq is %d)", nextSeq)}
	}
	return nil
}

// sqlitePath is the absolute file path a sqlite:// URL names (sqlite:///abs/path.db or
// sqlite://relative/path.db); both Open and OpenReadOnly take their path from it.
func sqlitePath(url string) (string, error) {
	path := strings.TrimPrefix(url, "sqlite://")
	if strings.ContainsRune(path, '?') {
		return "", fmt.Errorf("open session log %q: sqlite URLs take no query parameters", connstr.Redact(url))
	}
	if path == "" || path == "/" {
		return "", fmt.Errorf("open session log %q: no file path; use sqlite:///abs/path.db or sqlite://relative/path.db", connstr.Redact(url))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("open session log %q: %w", connstr.Redact(url), err)
	}
	return abs, nil
}
