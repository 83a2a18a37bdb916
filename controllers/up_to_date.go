package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// upToDate reports, from the cache alone, that no phase has anything to do, so the reconcile
// costs no log-store read: most reconciles are the echo of the manager's own status write or
// of an agent write that needs no answer. It asks each phase's own question: the spec's
// generation was observed and found ready, no selection is new or pending or missing from the
// log, no boundary waits, no review is in progress, the config in force is unchanged, and the
// manager-owned status is the one this process last wrote or checked against the log (any
// other, such as another manager's, is checked against the log once).
func (r *AgentSessionReconciler) upToDate(ctx context.Context, s *agentsv1alpha1.AgentSession) bool {
	return observedReady(s) &&
		!selectionOutstanding(s) &&
		unanswered(s) == nil &&
		!reviewInProgress(s) &&
		r.patcher().unchangedSince(client.ObjectKeyFromObject(s), &s.Status) &&
		r.configUnchanged(ctx, s) &&
		r.storeUnchanged(s) // phase_store.go
}

// observedReady: the current generation was reconciled without a failure, and is Ready.
func observedReady(s *agentsv1alpha1.AgentSession) bool {
	c := meta.FindStatusCondition(s.Status.Conditions, agentsv1alpha1.ConditionReady)
	return s.Status.ObservedGeneration == s.Generation && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == s.Generation
}

// selectionOutstanding: a selection is new to the status (applySelection), pending
// (flushBetweenTurns, answerBoundary), or taken on but not what the log holds
// (reassertSelection).
func selectionOutstanding(s *agentsv1alpha1.AgentSession) bool {
	pm := &s.Status.PlanMode
	x := s.Spec.PlanMode.Active
	return newSelection(s) || pm.PendingActive != nil || pm.Config == nil || x != nil && *x != pm.Active
}

// newSelection: spec.planMode.active holds a value the status has not taken on yet.
func newSelection(s *agentsv1alpha1.AgentSession) bool {
	x, taken := s.Spec.PlanMode.Active, s.Status.PlanMode.Selection
	return x != nil && (taken == nil || *taken != *x)
}

// unanswered is the agent's reported boundary when the stored status has not answered it.
func unanswered(s *agentsv1alpha1.AgentSession) *agentsv1alpha1.StepBoundary {
	if a := s.Status.Agent; a != nil && a.Boundary != nil && !answered(s.Status.PlanMode.LastBoundary, a.Boundary) {
		return a.Boundary
	}
	return nil
}

// reviewInProgress: the review phase has something to open, decide, expire or withdraw: a post
// it has not opened, or an open review (its post withdrawn or not). A closed review is the
// record and stays with its post; the phase leaves it as it is, so a session that has had a
// review settles like any other instead of reading its log at every echo. A decision is a spec
// write, which observedReady sees as a new generation.
func reviewInProgress(s *agentsv1alpha1.AgentSession) bool {
	req, rs := agentReview(s), s.Status.Review
	if rs != nil && rs.Phase == agentsv1alpha1.ReviewPending {
		return true
	}
	return req != nil && (rs == nil || rs.ID != req.ID)
}

// configUnchanged: the PlanModeConfig in force is the one the status names.
func (r *AgentSessionReconciler) configUnchanged(ctx context.Context, s *agentsv1alpha1.AgentSession) bool {
	var cfg agentsv1alpha1.PlanModeConfig
	if err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.ConfigName()}, &cfg); err != nil {
		return false
	}
	c := s.Status.PlanMode.Config
	return c != nil && cfg.Name == c.Name && cfg.Generation == c.Generation
}
