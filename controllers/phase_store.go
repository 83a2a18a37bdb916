package controllers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// checkLogStore is readLog's check that the log is the session's: the store's identity (as last
// probed, StoreID) and the log's end must agree with status.planMode.storeID and nextSeq. A
// session that agrees, or records none yet, records the store's identity. One that does not
// stops with LogStoreMismatch, and its status keeps the position it recorded: projecting the
// shorter log over it would erase the evidence, and the next reconcile would carry on.
func (sc *sessionScope) checkLogStore(t harness.Tail) error {
	id := ""
	if sc.r.StoreID != nil {
		id = sc.r.StoreID()
	}
	if err := sc.session.LogStoreMismatch(id, t.NextSeq); err != nil {
		return logStoreMismatch(err)
	}
	if id != "" {
		sc.planMode.StoreID = id
	}
	return nil
}

// storeUnchanged: the status was recorded against the store as last probed, so a session
// that is otherwise up to date need not read its log; after the store's identity changed, each
// session's next reconcile reads it and meets checkLogStore.
func (r *AgentSessionReconciler) storeUnchanged(s *agentsv1alpha1.AgentSession) bool {
	if r.StoreID == nil {
		return true
	}
	id := r.StoreID()
	return id == "" || s.Status.PlanMode.StoreID == id
}

// allSessions maps a change of the store's identity to every session this manager watches.
func (r *AgentSessionReconciler) allSessions(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.cachedSessions(ctx, "the log store's identity", func(*agentsv1alpha1.AgentSession) bool { return true })
}
