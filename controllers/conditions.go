package controllers

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// Where a failure becomes a condition: the phases' failures (failures.go) are mapped here, at
// the end of the reconcile, to Ready (with the API's reasons) and the kstatus pair: Stalled
// while a person or the log store must act, Reconciling while a selection waits for a step
// boundary. Each condition carries the generation it was decided for.

// setConditions sets the conditions for the failures the phases reported, in their order (the
// one that ended the phases, if any, last), and returns the failure Ready shows, nil for none.
func (sc *sessionScope) setConditions(status *agentsv1alpha1.AgentSessionStatus, failures []*failure) *failure {
	gen := sc.session.Generation
	set := func(typ string, cs metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: typ, Status: cs, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	shown := stallingFailure(status.PlanMode, failures)
	reason, msg := sc.readiness(status.PlanMode, failures, shown)
	switch {
	case shown != nil:
		set(agentsv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
		set(agentsv1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	case reason == agentsv1alpha1.ReasonSelectionPending:
		set(agentsv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	default:
		set(agentsv1alpha1.ConditionReady, metav1.ConditionTrue, reason, msg)
	}
	if shown == nil {
		meta.RemoveStatusCondition(&status.Conditions, agentsv1alpha1.ConditionStalled)
	}
	if shown == nil && reason == agentsv1alpha1.ReasonSelectionPending {
		set(agentsv1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, agentsv1alpha1.ConditionReconciling)
	}
	return shown
}

// stallingFailure is the failure the session stalls on: the one that ended the phases, else
// the first the others reported, skipping one that stalls only in plan mode when the session
// is neither in plan mode nor entering it.
func stallingFailure(pm agentsv1alpha1.PlanModeStatus, failures []*failure) *failure {
	if n := len(failures); n > 0 && !failures[n-1].goOn {
		return failures[n-1]
	}
	entering := pm.Pending && pm.PendingActive != nil && *pm.PendingActive
	for _, f := range failures {
		if !f.inPlanMode || entering || pm.Active {
			return f
		}
	}
	return nil
}

// readiness is Ready's reason and message: the stalling failure's, else the selection's.
func (sc *sessionScope) readiness(pm agentsv1alpha1.PlanModeStatus, failures []*failure, shown *failure) (reason, msg string) {
	switch {
	case shown != nil:
		return shown.reason, shown.Error()
	case pm.Pending && pm.QueuedInTurn != 0 && !pm.TurnOpen:
		return agentsv1alpha1.ReasonSelectionPending,
			fmt.Sprintf("plan mode %s was selected during turn %d and waits for a step boundary of the agent's next turn", planmode.OnOff(*pm.PendingActive), pm.QueuedInTurn)
	case pm.Pending:
		return agentsv1alpha1.ReasonSelectionPending,
			fmt.Sprintf("plan mode %s is selected and waits for the agent's next step boundary", planmode.OnOff(*pm.PendingActive))
	}
	// In sync, Ready says nothing its reason and status.planMode.active do not: its message is
	// empty (as Cluster API's True conditions), and every status write carries fewer bytes. A
	// failure that does not stall a session out of plan mode is still named.
	msgs := make([]string, 0, len(failures))
	for _, f := range failures {
		msgs = append(msgs, f.Error())
	}
	return agentsv1alpha1.ReasonInSync, strings.Join(msgs, "; ")
}

// warnOnce records the Warning Event of the failure Ready shows, when the stored Ready does not
// show its reason yet: once per failure, not once per reconcile.
func (sc *sessionScope) warnOnce(shown *failure) {
	if shown == nil {
		return
	}
	if c := meta.FindStatusCondition(sc.session.Status.Conditions, agentsv1alpha1.ConditionReady); c != nil && c.Reason == shown.reason {
		return
	}
	sc.emit(corev1.EventTypeWarning, shown.reason, shown.action, shown.Error())
}

// answerWaitingBoundary answers Failed, with the failure's reason, the boundary the agent waits
// at when a failure ended the phases before it was answered.
func (sc *sessionScope) answerWaitingBoundary(stop *failure) {
	b := unanswered(sc.session)
	if stop == nil || !stop.answer || b == nil || answered(sc.planMode.LastBoundary, b) {
		return
	}
	active, next := sc.stored.Active, sc.stored.NextSeq
	if sc.logRead {
		active, next = sc.tail.Active, sc.tail.NextSeq
	}
	ack := sc.ack(b, agentsv1alpha1.BoundaryFailed, active, next)
	ack.Reason, ack.Message = stop.reason, stop.Error()
	if stop.reason == agentsv1alpha1.ReasonLogStoreError {
		ack.Message = storeFailureMsgPrefix + stop.Error() + storeFailureMsgSuffix
	}
	sc.planMode.LastBoundary = ack
}

// liveTurn: a report naming turn was made while the log's turn is still open (one naming an
// ended turn is not; an unread log counts as live: nothing says otherwise).
func (sc *sessionScope) liveTurn(turn int64) bool {
	return !sc.logRead || sc.tail.TurnOpen && turn >= sc.tail.Turn
}
