package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// Store operations (label "operation").
const (
	OpAppend   = "append"
	OpTail     = "tail"
	OpReadFrom = "read_from"
	OpFork     = "fork"
	OpInfo     = "info"
	OpSeed     = "seed"
	OpClaim    = "claim_owner"
	OpSessions = "sessions"
	OpClaims   = "claim_owners"
)

// InstrumentStore wraps store so every call the manager makes is counted and timed in r
// (planmode_log_store_*). Results are ok, conflict (a compare-and-swap refusal, normal under
// concurrency), not_found, or error (counted in planmode_log_store_errors_total too).
func InstrumentStore(store sessionlog.Store, r *Recorder) sessionlog.Store {
	if r == nil {
		return store
	}
	return &instrumented{Store: store, r: r}
}

type instrumented struct {
	sessionlog.Store
	r *Recorder
}

func (s *instrumented) observe(op string, start time.Time, err error) {
	result := "ok"
	switch {
	case err == nil:
	case sessionlog.IsConflict(err):
		result = "conflict"
	case errors.Is(err, sessionlog.ErrNotFound):
		result = "not_found"
	case errors.Is(err, context.Canceled):
		result = "canceled" // the manager is stopping: not the store's fault
	default:
		result = "error"
		s.r.storeErrors.WithLabelValues(op).Inc()
	}
	s.r.storeOps.WithLabelValues(op, result).Inc()
	s.r.storeOpDurations.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

func (s *instrumented) Append(ctx context.Context, sessionID string, events []harness.Event) (harness.Tail, error) {
	start := time.Now()
	t, err := s.Store.Append(ctx, sessionID, events)
	s.observe(OpAppend, start, err)
	return t, err
}

func (s *instrumented) Tail(ctx context.Context, sessionID string) (harness.Tail, error) {
	start := time.Now()
	t, err := s.Store.Tail(ctx, sessionID)
	s.observe(OpTail, start, err)
	return t, err
}

func (s *instrumented) ReadFrom(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]harness.Event, error) {
	start := time.Now()
	evs, err := s.Store.ReadFrom(ctx, sessionID, fromSeq, limit)
	s.observe(OpReadFrom, start, err)
	return evs, err
}

func (s *instrumented) Fork(ctx context.Context, srcID, dstID string, throughSeq int64, owner sessionlog.Owner) (harness.Tail, error) {
	start := time.Now()
	t, err := s.Store.Fork(ctx, srcID, dstID, throughSeq, owner)
	s.observe(OpFork, start, err)
	return t, err
}

func (s *instrumented) Info(ctx context.Context, sessionID string) (sessionlog.SessionInfo, error) {
	start := time.Now()
	info, err := s.Store.Info(ctx, sessionID)
	s.observe(OpInfo, start, err)
	return info, err
}

func (s *instrumented) Seed(ctx context.Context, info sessionlog.SessionInfo, events []harness.Event, owner sessionlog.Owner) (harness.Tail, error) {
	start := time.Now()
	t, err := s.Store.Seed(ctx, info, events, owner)
	s.observe(OpSeed, start, err)
	return t, err
}

func (s *instrumented) ClaimOwner(ctx context.Context, sessionID string, owner sessionlog.Owner) (sessionlog.Owner, error) {
	start := time.Now()
	o, err := s.Store.ClaimOwner(ctx, sessionID, owner)
	s.observe(OpClaim, start, err)
	return o, err
}

func (s *instrumented) Sessions(ctx context.Context, fn func(sessionlog.SessionState) error) error {
	start := time.Now()
	err := s.Store.Sessions(ctx, fn)
	s.observe(OpSessions, start, err)
	return err
}

func (s *instrumented) ClaimOwners(ctx context.Context, claims []sessionlog.OwnerClaim) ([]sessionlog.Owner, error) {
	start := time.Now()
	held, err := s.Store.ClaimOwners(ctx, claims)
	s.observe(OpClaims, start, err)
	return held, err
}
