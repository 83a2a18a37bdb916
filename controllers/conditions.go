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
		set(agentsv1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, "a selection waits for the agent's next step boundary")
	} else {
		meta.RemoveStatusCondition(&status.Conditions, agentsv1alpha1.ConditionReconciling)
	}
}

// readiness decides the Ready reason and message, and whether the session is stalled: from
// the failure of this reconcile, a missing config, or the answer to the agent's last boundary.
func (sc *sessionScope) readiness(pm agentsv1alpha1.PlanModeStatus, failure error) (reason, msg string, stalled bool) {
	lb := pm.LastBoundary
	failedFor := func(r string) bool { return lb != nil && lb.Result == agentsv1alpha1.BoundaryFailed && lb.Reason == r }
	switch {
	case failure != nil:
		return reportedFailure(failure), failure.Error(), true
	case sc.configMissing != nil:
		return agentsv1alpha1.ReasonConfigMissing, sc.configMissing.Error(), true
	case failedFor(agentsv1alpha1.ReasonInvalidBoundary):
		return agentsv1alpha1.ReasonInvalidBoundary, lb.Message, true
	case failedFor(agentsv1alpha1.ReasonLogStoreError) && pm.Pending:
		return agentsv1alpha1.ReasonLogStoreError, lb.Message, true
	case pm.Pending:
		return agentsv1alpha1.ReasonSelectionPending,
			fmt.Sprintf("plan mode %s is selected and waits for the agent's next step boundary", planmode.OnOff(*pm.PendingActive)), false
	}
	return agentsv1alpha1.ReasonInSync, fmt.Sprintf("plan mode %s is committed in the session log", planmode.OnOff(pm.Active)), false
}
