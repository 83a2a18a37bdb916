package controllers

import (
	"errors"
	"fmt"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// StoreError is a session-log read or write that failed. The status reports it
// (LogStoreUnavailable, Stalled), the selection stays pending, and the reconcile is retried
// with the workqueue's backoff.
type StoreError struct{ Err error }

func (e *StoreError) Error() string { return e.Err.Error() }
func (e *StoreError) Unwrap() error { return e.Err }

func storeErrorf(format string, args ...any) error {
	return &StoreError{Err: fmt.Errorf(format, args...)}
}

// AppendConflictError is another writer winning the race for the log's next seq on every
// attempt of one reconcile. The status reports it (AppendConflict, Stalled) until a retry wins.
type AppendConflictError struct {
	SessionID string
	Attempts  int
}

func (e *AppendConflictError) Error() string {
	return fmt.Sprintf("append to session %q: seq conflict persisted after %d attempts", e.SessionID, e.Attempts)
}

// ConfigMissingError is a session whose PlanModeConfig does not exist. Only entering plan mode
// waits for it; the reconcile and the agent's steps go on.
type ConfigMissingError struct{ Namespace, Name string }

func (e *ConfigMissingError) Error() string {
	return fmt.Sprintf("PlanModeConfig %q not found in namespace %q: create it or set spec.planMode.configRef.name; entering plan mode waits for it", e.Name, e.Namespace)
}

// ForkRefusedError is a spec.fork the log cannot honour: the session's log exists and was not
// seeded from the named parent (an agent without fork support appended first, or the session
// ID was reused). Terminal: the status says so (ForkRefused, Stalled) and names the fix; the
// other phases still run on the log as it is.
type ForkRefusedError struct {
	SessionID, Parent, ActualParent string
	// Reason, when set, is why the parent's prefix cannot be copied (the log does not exist yet).
	Reason string
}

func (e *ForkRefusedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("spec.fork: session %q cannot be seeded from %q: %s", e.SessionID, e.Parent, e.Reason)
	}
	had := "no parent"
	if e.ActualParent != "" {
		had = fmt.Sprintf("parent %q", e.ActualParent)
	}
	return fmt.Sprintf("spec.fork: session %q already exists in the log store with %s, so it cannot be seeded from %q "+
		"(an agent appended before the fork was seeded, or the session ID was reused); "+
		"create the AgentSession again with a new spec.sessionID, and run agents built with a protocol v2 agent SDK, which seed the fork themselves",
		e.SessionID, had, e.Parent)
}

// recomputeError restarts the phases: a compare-and-swap append lost the race for the next
// seq, or the cached session was older than the API server's. Nothing from the attempt is kept;
// the log recognises appends already made, so none is repeated.
type recomputeError struct {
	// from is the live session to recompute from; nil: the same session, with a fresh tail.
	from   *agentsv1alpha1.AgentSession
	reason string
}

func (e *recomputeError) Error() string { return "recompute: " + e.reason }

// reportedFailure returns the reason a failure is shown with in the status, or "" for an error
// that aborts the reconcile without a write (an API read that failed).
func reportedFailure(err error) string {
	var storeErr *StoreError
	var conflictErr *AppendConflictError
	var inUseErr *SessionIDInUseError
	var mismatchErr *LogStoreMismatchError
	switch {
	case errors.As(err, &inUseErr):
		return agentsv1alpha1.ReasonSessionIDInUse
	case errors.As(err, &mismatchErr), sessionlog.IsStoreLost(err):
		return agentsv1alpha1.ReasonLogStoreMismatch
	case errors.As(err, &storeErr):
		return agentsv1alpha1.ReasonLogStoreError
	case errors.As(err, &conflictErr):
		return agentsv1alpha1.ReasonAppendConflict
	}
	return ""
}
