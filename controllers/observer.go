package controllers

import (
	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// StatusObserver is told about every status the reconciler writes: internal/metrics derives
// its transition, boundary and review metrics from the difference. It is called only after the
// write succeeded, so a reconcile that loses a conflict and recomputes is never counted twice.
type StatusObserver interface {
	ObserveStatus(s *agentsv1alpha1.AgentSession, before, after agentsv1alpha1.AgentSessionStatus)
	// ObserveHeld is told that a selection of s waits for the agent's boundary with its
	// pending write held (pending_deferral.go).
	ObserveHeld(s *agentsv1alpha1.AgentSession)
	// ObserveStorm is told that the reconciler entered a storm (backlog.go): its Events wait
	// until the storm is over.
	ObserveStorm()
}

func (r *AgentSessionReconciler) observe(s *agentsv1alpha1.AgentSession, before, after agentsv1alpha1.AgentSessionStatus) {
	if r.Metrics != nil {
		r.Metrics.ObserveStatus(s, before, after)
	}
}

func (r *AgentSessionReconciler) observeHeld(s *agentsv1alpha1.AgentSession) {
	if r.Metrics != nil {
		r.Metrics.ObserveHeld(s)
	}
}

func (r *AgentSessionReconciler) observeStorm() {
	if r.Metrics != nil {
		r.Metrics.ObserveStorm()
	}
}
