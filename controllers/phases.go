package controllers

import (
	"context"
	"errors"

	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// maxRecomputes bounds how often one reconcile restarts its phases after losing a race.
const maxRecomputes = 5

// phase is one named step of a reconcile. A *failure (failures.go) is reported in the status
// and, unless it lets the others go on, ends the phases; a *recomputeError restarts them from
// a fresher read; any other error aborts the reconcile without a write.
type phase func(sc *sessionScope, ctx context.Context) (ctrl.Result, error)

// phases run in this order, which is also the order in which their failures take Ready's
// reason. Each lives in the file named after its concern: phase_owner.go, phase_fork.go,
// phase_config.go, phase_log.go (with phase_store.go), phase_selection.go, phase_boundary.go.
// Plan review (phase_review.go) and the conditions (conditions.go) run in finish, on the
// phases' result.
var phases = []phase{
	(*sessionScope).claimLog, // one log per session, before anything reads it
	(*sessionScope).ensureFork,
	(*sessionScope).readConfig,
	(*sessionScope).readLog,
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
	basis, newest, err := r.patcher().basis(ctx, s)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		sc := newScope(r, basis, newest)
		res, failures, err := sc.runPhases(ctx)
		var again *recomputeError
		if errors.As(err, &again) {
			if attempt < maxRecomputes {
				log.V(1).Info("recomputing", "why", again.reason, "attempt", attempt+1)
				if again.from != nil {
					basis, newest = again.from, true
				}
				continue
			}
			failures, err = append(failures, asFailure(appendConflict(basis.Spec.SessionID, attempt+1))), nil
		}
		if err != nil {
			return nil, err
		}
		sc.finish(res, failures)
		return sc, nil
	}
}

// runPhases runs the phases in order and returns the soonest requeue they asked for and the
// failures they reported, until one that ends the phases. Any other error ends them too.
func (sc *sessionScope) runPhases(ctx context.Context) (ctrl.Result, []*failure, error) {
	var res ctrl.Result
	var failures []*failure
	for _, p := range phases {
		r, err := p(sc, ctx)
		res = soonest(res, r)
		if err == nil {
			continue
		}
		f := asFailure(err)
		if f == nil {
			return res, failures, err
		}
		failures = append(failures, f)
		if !f.goOn {
			break
		}
	}
	return res, failures, nil
}

// finish turns the phases' outcome into the status to write: the log's mirror fields, plan
// review, the conditions, and observedGeneration, which advances only when the phases all ran.
func (sc *sessionScope) finish(res ctrl.Result, failures []*failure) {
	if n := len(failures); n > 0 && !failures[n-1].goOn {
		sc.stop = failures[n-1]
	}
	if sc.logRead {
		sc.project() // whatever failed later, the status mirrors the tail as it stands
	}
	sc.answerWaitingBoundary(sc.stop)
	status := *sc.session.Status.DeepCopy()
	status.PlanMode = sc.planMode
	sc.recordPlanModeActor(&status) // review_identity.go
	if sc.stop == nil {
		status.ObservedGeneration = sc.session.Generation
		res = soonest(res, sc.review(&status))
	}
	// No poll for a turn's end: a selection queued in a turn is appended at a step boundary
	// (the agent's report is an API event), never because the turn ended.
	sc.warnOnce(sc.setConditions(&status, failures))
	sc.setReviewConditions(&status) // review_identity.go
	// old is compared, not written: a shallow copy, and only what is changed below is copied.
	old := sc.session.Status
	if n := old.PlanMode.Notice; n != nil && sc.logRead && n.Seq < sc.tail.LastStepStartSeq {
		old.PlanMode.Notice = nil // a delivered notice is dropped with the next write, but is no reason to write
	}
	if sc.logRead && ackNoticeDelivered(old.PlanMode.LastBoundary, sc.tail) {
		lb := *old.PlanMode.LastBoundary
		lb.Notice = "" // the same for an answer's
		old.PlanMode.LastBoundary = &lb
	}
	sc.status, sc.result = status, res
	sc.changed = writeDue(old, status)
	sc.holdable = sc.holdable && len(failures) == 0 && onlyPendingDiffers(old, status)
}

// outcome is what the reconcile returns once the status is written: the phases' requeue, or
// the failure that ended them, retried with the workqueue's backoff when it can pass on its
// own and otherwise terminal (a change to the session still reconciles it).
func (sc *sessionScope) outcome() (ctrl.Result, error) {
	switch {
	case sc.stop == nil:
		return sc.result, nil
	case sc.stop.retry:
		return ctrl.Result{}, sc.stop
	}
	return ctrl.Result{}, reconcile.TerminalError(sc.stop)
}

// logChecked reports that the stored status was computed against a log tail read with all the
// phases run: when no write is due, it is known to match the log.
func (sc *sessionScope) logChecked() bool { return sc.logRead && sc.stop == nil }

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
