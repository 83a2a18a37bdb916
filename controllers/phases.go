package controllers

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// maxRecomputes bounds how often one reconcile restarts its phases after losing a race.
const maxRecomputes = 5

// phase is one named step of a reconcile. A failure the status reports (*StoreError,
// *AppendConflictError) stops the phases after it; a *recomputeError restarts them from a
// fresher read; any other error aborts the reconcile without a write.
type phase func(sc *sessionScope, ctx context.Context) (ctrl.Result, error)

// phases run in this order. Each lives in the file named after its concern: phase_config.go,
// phase_fork.go, phase_log.go, phase_selection.go, phase_boundary.go. Plan review
// (phase_review.go) and the conditions (conditions.go) run in finish, on the phases' result.
var phases = []phase{
	(*sessionScope).claimLog, // phase_owner.go: one log per session, before anything reads it
	(*sessionScope).readConfig,
	(*sessionScope).ensureFork,
	(*sessionScope).readLog,
	(*sessionScope).checkLogStore, // phase_store.go
	(*sessionScope).recoverUnrecorded,
	(*sessionScope).applySelection,
	(*sessionScope).reassertSelection,
	(*sessionScope).flushBetweenTurns,
	(*sessionScope).answerBoundary,
}

// compute runs the phases for one session and returns the scope holding the status to write.
// It appends plan/mode events (compare-and-swap) where the protocol says so, but writes
// nothing to the API. An error means the reconcile decided nothing.
func (r *AgentSessionReconciler) compute(ctx context.Context, s *agentsv1alpha1.AgentSession) (*sessionScope, error) {
	log := logf.FromContext(ctx)
	basis, newest, err := r.newestKnown(ctx, s)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		sc := newScope(r, basis, newest)
		res, err := sc.runPhases(ctx)
		var again *recomputeError
		if errors.As(err, &again) {
			if attempt < maxRecomputes {
				log.V(1).Info("recomputing", "why", again.reason, "attempt", attempt+1)
				if again.from != nil {
					basis, newest = again.from, true
				}
				continue
			}
			err = &AppendConflictError{SessionID: basis.Spec.SessionID, Attempts: attempt + 1}
		}
		if err != nil && reportedFailure(err) == "" {
			return nil, err
		}
		sc.finish(res, err)
		return sc, nil
	}
}

// runPhases runs the phases until one fails, and returns the soonest requeue they asked for.
func (sc *sessionScope) runPhases(ctx context.Context) (ctrl.Result, error) {
	var res ctrl.Result
	for _, p := range phases {
		r, err := p(sc, ctx)
		if err != nil {
			return res, err
		}
		res = soonest(res, r)
	}
	return res, nil
}

// finish turns the phases' outcome into the status to write: the log's mirror fields, plan
// review, the conditions, and observedGeneration, which advances only when nothing failed.
func (sc *sessionScope) finish(res ctrl.Result, failure error) {
	if sc.logRead {
		sc.project() // whatever failed later, the status mirrors the tail as it stands
	}
	status := *sc.session.Status.DeepCopy()
	status.PlanMode = sc.planMode
	sc.recordPlanModeActor(&status) // review_identity.go
	if failure == nil {
		status.ObservedGeneration = sc.session.Generation
		res = soonest(res, sc.review(&status))
	}
	// No poll for a turn's end: a selection queued in a turn is appended at a step boundary
	// (the agent's report is an API event), never because the turn ended.
	sc.setConditions(&status, failure)
	sc.setReviewConditions(&status) // review_identity.go
	old := sc.session.Status.DeepCopy()
	if n := old.PlanMode.Notice; n != nil && sc.logRead && n.Seq < sc.tail.LastStepStartSeq {
		old.PlanMode.Notice = nil // a delivered notice is dropped with the next write, but is no reason to write
	}
	sc.status, sc.failure, sc.result = status, failure, res
	sc.changed = statusChanged(*old, status)
}

// logChecked reports that the stored status was computed against a log tail read without a
// failure: when no write is due, it is known to match the log.
func (sc *sessionScope) logChecked() bool { return sc.logRead && sc.failure == nil }

// statusChanged reports whether a write is due. The log-position mirror fields (nextSeq,
// turnOpen, toldActive) alone never cause a write: they move with every event the agent
// appends, and writing them would cost an API write per agent event. They are refreshed with
// every write made for another reason.
func statusChanged(stored, computed agentsv1alpha1.AgentSessionStatus) bool {
	a, b := stored.DeepCopy(), computed.DeepCopy()
	for _, s := range []*agentsv1alpha1.AgentSessionStatus{a, b} {
		s.PlanMode.NextSeq = 0
		s.PlanMode.TurnOpen = false
		s.PlanMode.ToldActive = nil
	}
	return !equality.Semantic.DeepEqual(a, b)
}

// soonest is the result that looks again first (a zero result never asks to).
func soonest(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.RequeueAfter == 0:
		return b
	case b.RequeueAfter == 0 || a.RequeueAfter <= b.RequeueAfter:
		return a
	}
	return b
}
