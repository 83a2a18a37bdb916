package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// setConditions sets Ready (with the API's reasons) and the kstatus pair: Stalled while a
// human or the log store must act, Reconciling while a selection waits for a step boundary.
// Each condition carries the generation it was decided for.
func (sc *sessionScope) setConditions(status *agentsv1alpha1.AgentSessionStatus, failure error) {
	gen := sc.session.Generation
	set := func(typ string, cs metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: typ, Status: cs, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	reason, msg, stalled := sc.readiness(status.PlanMode, failure)
	if stalled || reason == agentsv1alpha1.ReasonSelectionPending {
		set(agentsv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	} else {
		set(agentsv1alpha1.ConditionReady, metav1.ConditionTrue, reason, msg)
	}
	if stalled {
		set(agentsv1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, agentsv1alpha1.ConditionStalled)
	}
	if reason == agentsv1alpha1.ReasonSelectionPending {
		set(agentsv1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, agentsv1alpha1.ConditionReconciling)
	}
}

// readiness decides the Ready reason and message, and whether the session is stalled. Stalled
// means a human must act: a failure of this reconcile, a spec.fork the log cannot honour, plan
// mode with no PlanModeConfig to render (entering it is held, or it is committed and its steps
// get no fresh guidance), or an invalid report from a turn that is still open. A report from a
// turn that has ended needs no one, and neither does a missing config of a session that is
// not in plan mode and not entering it.
func (sc *sessionScope) readiness(pm agentsv1alpha1.PlanModeStatus, failure error) (reason, msg string, stalled bool) {
	lb := pm.LastBoundary
	failedFor := func(r string) bool { return lb != nil && lb.Result == agentsv1alpha1.BoundaryFailed && lb.Reason == r }
	entering := pm.Pending && pm.PendingActive != nil && *pm.PendingActive
	switch {
	case failure != nil:
		return reportedFailure(failure), failure.Error(), true
	case sc.forkRefused != nil:
		return agentsv1alpha1.ReasonForkRefused, sc.forkRefused.Error(), true
	case sc.configMissing != nil && (entering || pm.Active):
		return agentsv1alpha1.ReasonConfigMissing, sc.configMissing.Error(), true
	case failedFor(agentsv1alpha1.ReasonInvalidBoundary) && sc.liveTurn(lb.Turn):
		return agentsv1alpha1.ReasonInvalidBoundary, lb.Message, true
	case failedFor(agentsv1alpha1.ReasonLogStoreError) && pm.Pending:
		return agentsv1alpha1.ReasonLogStoreError, lb.Message, true
	case pm.Pending && pm.QueuedInTurn != 0 && !pm.TurnOpen:
		return agentsv1alpha1.ReasonSelectionPending,
			fmt.Sprintf("plan mode %s was selected during turn %d and waits for a step boundary of the agent's next turn", planmode.OnOff(*pm.PendingActive), pm.QueuedInTurn), false
	case pm.Pending:
		return agentsv1alpha1.ReasonSelectionPending,
			fmt.Sprintf("plan mode %s is selected and waits for the agent's next step boundary", planmode.OnOff(*pm.PendingActive)), false
	}
	msg = fmt.Sprintf("plan mode %s is committed in the session log", planmode.OnOff(pm.Active))
	if sc.configMissing != nil {
		msg += "; " + sc.configMissing.Error()
	}
	return agentsv1alpha1.ReasonInSync, msg, false
}

// liveTurn: a report naming turn was made while the log's turn is still open (one naming an
// ended turn is not; an unread log counts as live: nothing says otherwise).
func (sc *sessionScope) liveTurn(turn int64) bool {
	return !sc.logRead || sc.tail.TurnOpen && turn >= sc.tail.Turn
}
