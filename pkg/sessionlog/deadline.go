package sessionlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// DefaultCallTimeout bounds each store call made through a Store from Open, so a hung store
// (a PostgreSQL that accepts connections but never answers, a SQLite file another process
// keeps locked) becomes an error instead of a caller blocked for ever. It is longer than
// SQLite's busy timeout, so a lock held too long is reported as SQLite's own busy error.
const DefaultCallTimeout = 15 * time.Second

// CallTimeout sets the deadline of each store call (and of Open itself when its context has
// none): DefaultCallTimeout unless given. A call whose context has an earlier deadline keeps it.
func CallTimeout(d time.Duration) Option { return func(o *openOptions) { o.callTimeout = d } }

// TimeoutError is a store call that did not finish within its deadline: the store is hung or
// unreachable. Nothing is known to be written; an Append may have committed just before its
// deadline, which the next read of the tail (compare-and-swap on seq) shows.
type TimeoutError struct {
	Op      string // Append, Tail, ReadFrom, Fork, Info, Seed, ClaimOwner, ClaimOwners, OwnerOf, ReleaseOwner, Sessions, Identity, Open
	Timeout time.Duration
	Err     error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("the session log store did not answer %s within %s (hung or unreachable): %v", e.Op, e.Timeout, e.Err)
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// IsTimeout reports whether err is (or wraps) a *TimeoutError.
func IsTimeout(err error) bool {
	var t *TimeoutError
	return errors.As(err, &t)
}

// deadlineStore gives every call of a backend its own deadline.
type deadlineStore struct {
	s       Store
	timeout time.Duration
}

func withDeadlines(s Store, timeout time.Duration) Store {
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	return &deadlineStore{s: s, timeout: timeout}
}

// bounded runs call under the store's deadline and names a missed deadline as a TimeoutError;
// a caller's own cancellation or earlier deadline is returned as the backend reported it.
func bounded[T any](parent context.Context, d *deadlineStore, op string, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(parent, d.timeout)
	defer cancel()
	v, err := call(ctx)
	if err != nil && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return v, &TimeoutError{Op: op, Timeout: d.timeout, Err: err}
	}
	return v, err
}

func (d *deadlineStore) Append(ctx context.Context, sessionID string, events []harness.Event) (harness.Tail, error) {
	return bounded(ctx, d, "Append", func(ctx context.Context) (harness.Tail, error) { return d.s.Append(ctx, sessionID, events) })
}

func (d *deadlineStore) Tail(ctx context.Context, sessionID string) (harness.Tail, error) {
	return bounded(ctx, d, "Tail", func(ctx context.Context) (harness.Tail, error) { return d.s.Tail(ctx, sessionID) })
}

func (d *deadlineStore) ReadFrom(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]harness.Event, error) {
	return bounded(ctx, d, "ReadFrom", func(ctx context.Context) ([]harness.Event, error) {
		return d.s.ReadFrom(ctx, sessionID, fromSeq, limit)
	})
}

func (d *deadlineStore) Fork(ctx context.Context, srcID, dstID string, throughSeq int64, owner Owner) (harness.Tail, error) {
	return bounded(ctx, d, "Fork", func(ctx context.Context) (harness.Tail, error) { return d.s.Fork(ctx, srcID, dstID, throughSeq, owner) })
}

func (d *deadlineStore) Info(ctx context.Context, sessionID string) (SessionInfo, error) {
	return bounded(ctx, d, "Info", func(ctx context.Context) (SessionInfo, error) { return d.s.Info(ctx, sessionID) })
}

func (d *deadlineStore) Seed(ctx context.Context, info SessionInfo, events []harness.Event, owner Owner) (harness.Tail, error) {
	return bounded(ctx, d, "Seed", func(ctx context.Context) (harness.Tail, error) { return d.s.Seed(ctx, info, events, owner) })
}

func (d *deadlineStore) ClaimOwner(ctx context.Context, sessionID string, owner Owner) (Owner, error) {
	return bounded(ctx, d, "ClaimOwner", func(ctx context.Context) (Owner, error) { return d.s.ClaimOwner(ctx, sessionID, owner) })
}

func (d *deadlineStore) OwnerOf(ctx context.Context, sessionID string) (Owner, bool, error) {
	var found bool
	o, err := bounded(ctx, d, "OwnerOf", func(ctx context.Context) (Owner, error) {
		o, ok, err := d.s.OwnerOf(ctx, sessionID)
		found = ok
		return o, err
	})
	return o, found, err
}

func (d *deadlineStore) ReleaseOwner(ctx context.Context, sessionID string, holder Owner) error {
	_, err := bounded(ctx, d, "ReleaseOwner", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.s.ReleaseOwner(ctx, sessionID, holder)
	})
	return err
}

func (d *deadlineStore) Identity(ctx context.Context) (string, error) {
	return bounded(ctx, d, "Identity", d.s.Identity)
}

func (d *deadlineStore) Close() error { return d.s.Close() }

// unwrapBackend returns the backend under the deadline layer (test hooks reach it).
func unwrapBackend(s Store) Store {
	if d, ok := s.(*deadlineStore); ok {
		s = d.s
	}
	if r, ok := s.(*reopeningSQLite); ok {
		r.mu.RLock()
		defer r.mu.RUnlock()
		return r.cur
	}
	return s
}
