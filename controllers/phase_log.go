package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// readLog reads the log's tail and checks that it is the log the status was recorded against
// (phase_store.go). When the log cannot be read at all, a waiting boundary is answered Failed at
// once (failures.go), so the agent goes on instead of waiting out its bound.
func (sc *sessionScope) readLog(ctx context.Context) (ctrl.Result, error) {
	sid := sc.session.Spec.SessionID
	t, err := sc.tailNow(ctx)
	if err != nil {
		return ctrl.Result{}, storeFailure("ReadLog", "read the log tail of session %q: %w", sid, err)
	}
	if err := sc.checkLogStore(t); err != nil {
		return ctrl.Result{}, err
	}
	sc.tail = t
	sc.logRead = true
	return ctrl.Result{}, nil
}

// tailNow is the log's tail: the one read at start when it stands for a read now
// (warm_start.go), else one read from the store.
func (sc *sessionScope) tailNow(ctx context.Context) (harness.Tail, error) {
	id := ""
	if sc.r.StoreID != nil {
		id = sc.r.StoreID()
	}
	if t, ok := sc.r.warm(ctx).take(sc.session, id); ok {
		return t, nil
	}
	return sc.r.Store.Tail(ctx, sc.session.Spec.SessionID)
}

// recoverUnrecorded recognises a plan/mode this manager appended but never recorded in the
// status (a crash or a failed status write between the append and the patch): the log is the
// truth, so the committed state comes from the tail, and the narration it owes is recomputed.
func (sc *sessionScope) recoverUnrecorded(context.Context) (ctrl.Result, error) {
	t := sc.tail
	if t.LastPlanModeSeq < 0 || t.LastPlanModeSeq < sc.stored.NextSeq || t.LastPlanModeSeq < sc.forkSeedLength {
		return ctrl.Result{}, nil
	}
	sc.planMode.Notice = nil
	if t.LastPlanModeSeq < t.LastStepStartSeq {
		return ctrl.Result{}, nil // a step already started after it: nothing is owed any more
	}
	if sc.stored.PendingSource == agentsv1alpha1.PendingSourceExit && sc.stored.PendingActive != nil && *sc.stored.PendingActive == t.Active {
		return ctrl.Result{}, nil // an approved exit is never narrated
	}
	if n := planmode.Narration(t.LastShown, t.Active); n != "" {
		sc.planMode.Notice = &agentsv1alpha1.OwedNotice{Seq: t.LastPlanModeSeq, Text: n}
	}
	return ctrl.Result{}, nil
}

// project copies the log's tail into the status fields that mirror it.
func (sc *sessionScope) project() {
	t, pm := sc.tail, &sc.planMode
	if sc.stored.Active != t.Active || pm.LastTransitionTime == nil && t.Active {
		now := sc.r.now()
		pm.LastTransitionTime = &now
	}
	pm.Active = t.Active
	pm.NextSeq = t.NextSeq
	pm.TurnOpen = t.TurnOpen
	pm.ToldActive = t.LastShown
	pm.Pending = pm.PendingActive != nil && *pm.PendingActive != t.Active
	if pm.Notice != nil && pm.Notice.Seq < t.LastStepStartSeq {
		pm.Notice = nil // delivered: a step started after it
	}
	if ackNoticeDelivered(pm.LastBoundary, t) {
		ack := *pm.LastBoundary
		ack.Notice = ""
		pm.LastBoundary = &ack
	}
}

// ackNoticeDelivered: the step an answer admitted with a notice has started, so no agent reads
// that notice again (it takes an answer only for its current report, before the step starts);
// like a delivered owed notice, it is dropped with the next write rather than carried by every
// one.
func ackNoticeDelivered(ack *agentsv1alpha1.BoundaryAck, t harness.Tail) bool {
	return ack != nil && ack.Notice != "" && ack.NextSeq <= t.LastStepStartSeq
}

// appendPlanMode appends plan/mode{active} at seq with compare-and-swap. Losing the race for
// the seq restarts the phases on a fresh tail; any other failure is a *StoreError.
func (sc *sessionScope) appendPlanMode(ctx context.Context, seq int64, active bool) error {
	if err := sc.decideOnNewest(ctx); err != nil {
		return err
	}
	sid := sc.session.Spec.SessionID
	t, err := sc.r.Store.Append(ctx, sid, []harness.Event{harness.PlanModeEvent(seq, active)})
	if err != nil {
		if sessionlog.IsConflict(err) {
			return &recomputeError{reason: fmt.Sprintf("seq %d was taken", seq)}
		}
		return storeFailure("Append", "append plan/mode {active: %v} at seq %d to session %q: %w", active, seq, sid, err)
	}
	sc.tail = t
	sc.emitSeries(corev1.EventTypeNormal, EventReasonCommitted, transitionAction(active), committedNote(active))
	return nil
}

// decideOnNewest makes sure an append is decided on the API server's newest session, unless
// the reconcile already knows it is (status_patcher.go): a newer one restarts the phases from it.
func (sc *sessionScope) decideOnNewest(ctx context.Context) error {
	if sc.sessionIsNewest {
		return nil
	}
	newer, err := sc.r.patcher().newer(ctx, sc.session)
	if err != nil {
		return err
	}
	if newer != nil {
		return &recomputeError{from: newer, reason: "the cached session is older than the API server's"}
	}
	sc.sessionIsNewest = true
	return nil
}
