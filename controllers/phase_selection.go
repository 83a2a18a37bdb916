package controllers

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// applySelection is the harness's set(x), edge-triggered on spec.planMode.active: only a value
// the status has not taken on yet is a new selection, so a repeated reconcile never selects
// twice.
func (sc *sessionScope) applySelection(ctx context.Context) (ctrl.Result, error) {
	if !newSelection(sc.session) {
		return ctrl.Result{}, nil
	}
	sel := *sc.session.Spec.PlanMode.Active
	sc.planMode.Selection = &sel
	if !sel && sc.approvalExits() {
		return ctrl.Result{}, nil // the review records it as the approved exit: silent, at the next boundary
	}
	st := sc.state()
	if t, held := sc.r.pending.madeInTurn(sc.session, sel); held && (!st.TurnOpen || sc.tail.Turn != t) {
		// Made in turn t, which ended before the held write: as in the harness, it waits for a
		// step boundary of a later turn.
		st.TurnOpen, sc.madeInTurn = true, t
	}
	d := planmode.Set(st, sel)
	if d.Append != nil && *d.Append && sc.entryWaitsForConfig() {
		// Between turns with no guidance to render: the entry waits for the config (Ready says
		// so: ConfigMissing).
		sc.setPending(&planmode.Pending{Active: true, Narrate: true})
		return ctrl.Result{}, nil
	}
	switch d.Outcome {
	case planmode.Noop:
		return ctrl.Result{}, nil
	case planmode.Queued:
		sc.setPending(d.Pending)
		sc.holdable = sc.tail.TurnOpen && sc.madeInTurn == 0 && d.Pending.Narrate
		return ctrl.Result{}, nil
	case planmode.Cancelled:
		sc.setPending(d.Pending)
		return ctrl.Result{}, nil
	}
	// Committed: between turns, append at once.
	if err := sc.appendPlanMode(ctx, sc.tail.NextSeq, sel); err != nil {
		if asFailure(err) != nil {
			// Keep the durable selection pending so the between-turns flush retries it.
			sc.setPending(&planmode.Pending{Active: sel, Narrate: true})
		}
		return ctrl.Result{}, err
	}
	sc.setPending(nil)
	sc.setOwedNotice(d.Notice)
	return ctrl.Result{}, nil
}

// reassertSelection is the safety net under the edge-triggered selection: a selection the
// status has taken on (spec.planMode.active equals status.planMode.selection) that the log does
// not hold, with nothing pending, can only be one that was lost (for example decided on a
// cached object that lacked the user's newest spec before a crash). The user's desired state
// wins: it becomes pending again, and the between-turns flush or the next boundary commits it,
// narrated like any user selection. An approval's own active:false is left to the review.
func (sc *sessionScope) reassertSelection(ctx context.Context) (ctrl.Result, error) {
	x := sc.session.Spec.PlanMode.Active
	if x == nil || sc.planMode.PendingActive != nil || *x == sc.tail.Active || sc.approvalExits() {
		return ctrl.Result{}, nil
	}
	if sc.planMode.Selection == nil || *sc.planMode.Selection != *x {
		return ctrl.Result{}, nil // not taken on yet: applySelection decides it
	}
	if !*x || !sc.entryWaitsForConfig() {
		logf.FromContext(ctx).Info("the log does not hold the selection the status took on; selecting it again",
			"selection", *x, "logged", sc.tail.Active)
	}
	sc.setPending(&planmode.Pending{Active: *x, Narrate: true})
	return ctrl.Result{}, nil
}

// flushBetweenTurns appends, between turns, a selection made between turns whose append
// failed or was held (its config was missing), and clears a net-zero one. A selection queued
// during a turn is not appended when the turn ends: as in the harness it waits for a step
// boundary of a later turn, and a selection cancelled before then logs nothing.
func (sc *sessionScope) flushBetweenTurns(ctx context.Context) (ctrl.Result, error) {
	if sc.tail.TurnOpen || sc.planMode.PendingActive == nil {
		return ctrl.Result{}, nil
	}
	d := planmode.Flush(sc.state())
	if d.Append == nil {
		sc.setPending(nil) // net-zero: nothing to log
		return ctrl.Result{}, nil
	}
	if sc.planMode.QueuedInTurn != 0 || *d.Append && sc.entryWaitsForConfig() {
		return ctrl.Result{}, nil
	}
	if err := sc.appendPlanMode(ctx, sc.tail.NextSeq, *d.Append); err != nil {
		return ctrl.Result{}, err
	}
	sc.setPending(nil)
	sc.setOwedNotice(d.Notice)
	return ctrl.Result{}, nil
}
