package controllers

import (
	"errors"
	"fmt"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// A phase that cannot do what the session asks returns a *failure. The end of the reconcile
// maps the failures to the conditions, once (conditions.go): Ready's reason and message,
// Stalled, one Warning Event when Ready first shows the reason, and for a failure that ends the
// phases a Failed answer to a boundary the agent waits at. Any other error a phase returns
// aborts the reconcile without a write (an API read that failed) and is retried; a
// *recomputeError restarts the phases.
type failure struct {
	// reason is Ready's and Stalled's reason (an agentsv1alpha1 Reason constant), and the
	// Warning Event's.
	reason string
	err    error
	// action names the phase in the Warning Event.
	action string
	// goOn: the later phases still run on the log as it is, and the generation counts as
	// observed. A failure without it ends the phases.
	goOn bool
	// retry: the cause can pass with no change to the session (the log store comes back, a
	// race is won), so the workqueue retries with its backoff; otherwise only a change to the
	// session reconciles it again.
	retry bool
	// answer: a boundary the agent waits at is answered Failed with the reason, so the agent
	// does not wait in vain.
	answer bool
	// inPlanMode: the session stalls only while plan mode is committed or being entered; out of
	// plan mode the failure is only mentioned in Ready's message.
	inPlanMode bool
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// storeFailure is a session-log read or write that failed: the selection stays pending, and
// the reconcile is retried with the workqueue's backoff. A store that is no longer the one
// opened (sessionlog.StoreLostError) is a LogStoreMismatch, like a log that is not the one the
// status was recorded against.
func storeFailure(action, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if sessionlog.IsStoreLost(err) {
		return logStoreMismatch(err)
	}
	return &failure{reason: agentsv1alpha1.ReasonLogStoreError, err: err, action: action, retry: true, answer: true}
}

// appendConflict is another writer winning the race for the log's next seq on every attempt
// of one reconcile, until a retry wins.
func appendConflict(sessionID string, attempts int) error {
	return &failure{reason: agentsv1alpha1.ReasonAppendConflict, action: "Append", retry: true,
		err: fmt.Errorf("append to session %q: seq conflict persisted after %d attempts", sessionID, attempts)}
}

// sessionIDInUse is a session whose spec.sessionID names a log another AgentSession owns. No
// retry can cure it: spec.sessionID is immutable. The message does not name the owner, which
// may be in a namespace the reader cannot see; the manager's log does.
func sessionIDInUse(sessionID string) error {
	return &failure{reason: agentsv1alpha1.ReasonSessionIDInUse, action: "ClaimLog", answer: true,
		err: fmt.Errorf("spec.sessionID %q is the log of another AgentSession: this session never reads or writes it. "+
			"spec.sessionID is immutable: delete this AgentSession and create it with a session ID of its own", sessionID)}
}

// logStoreMismatch is a log store that is not the one the session's status was recorded
// against (api/v1alpha1's LogStoreMismatch). Appending there would run the session on a log
// that forgot its plan state, so nothing is appended, and the status keeps the recorded identity
// and position until the store is restored or adopted.
func logStoreMismatch(err error) error {
	return &failure{reason: agentsv1alpha1.ReasonLogStoreMismatch, err: err, action: "CheckLogStore", retry: true, answer: true}
}

// configMissing is a session whose PlanModeConfig does not exist. Only entering plan mode
// waits for it; the reconcile and the agent's steps go on.
func configMissing(namespace, name string) error {
	return &failure{reason: agentsv1alpha1.ReasonConfigMissing, action: "ReadConfig", goOn: true, inPlanMode: true,
		err: fmt.Errorf("PlanModeConfig %q not found in namespace %q: create it or set spec.planMode.configRef.name; entering plan mode waits for it", name, namespace)}
}

// forkRefused is a spec.fork the log cannot honour. spec.fork is immutable, so the message
// names the fix; the other phases still run on the log as it is.
func forkRefused(err error) error {
	return &failure{reason: agentsv1alpha1.ReasonForkRefused, err: err, action: "Fork", goOn: true}
}

// invalidBoundary is a boundary report refused while its turn is still open in the log.
func invalidBoundary(message string) error {
	return &failure{reason: agentsv1alpha1.ReasonInvalidBoundary, err: errors.New(message), action: "AnswerBoundary", goOn: true}
}

// standingStoreFailure is a boundary answered Failed because the log store failed, whose
// selection still waits: the answer stands until a later boundary applies it.
func standingStoreFailure(message string) error {
	return &failure{reason: agentsv1alpha1.ReasonLogStoreError, err: errors.New(message), action: "AnswerBoundary", goOn: true}
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

// asFailure returns err's *failure, or nil for an error that aborts the reconcile.
func asFailure(err error) *failure {
	var f *failure
	if errors.As(err, &f) {
		return f
	}
	return nil
}
