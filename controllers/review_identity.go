package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// Who caused each plan/mode, and the session's health while a plan waits for people. The
// session log's plan/mode data stays exactly {active} (the harness reads it), so the actor of
// each plan/mode the manager appends is kept in status.planMode.changes (the last
// MaxPlanModeChanges), written in the status write that records the append; kubectl plan log
// joins them to the log by seq (docs/review.md, "Identity").

// recordPlanModeActor names who caused the plan/mode the log gained since the stored status:
// for an approved exit, the approval (and whose vote completed it); for a selection, the
// identity the admission webhook stamped on spec.planMode.selectedBy. The Committed Event and
// the manager's log line say so too.
func (sc *sessionScope) recordPlanModeActor(status *agentsv1alpha1.AgentSessionStatus) {
	t := sc.tail
	if !sc.logRead || t.LastPlanModeSeq < 0 || t.LastPlanModeSeq < sc.stored.NextSeq || t.LastPlanModeSeq < sc.forkSeedLength {
		return
	}
	changes := status.PlanMode.Changes
	for _, c := range changes {
		if c.Seq == t.LastPlanModeSeq {
			return
		}
	}
	c := agentsv1alpha1.PlanModeChange{Seq: t.LastPlanModeSeq, Active: t.Active, Cause: agentsv1alpha1.PlanModeChangeSelection}
	var by string
	if sc.stored.PendingSource == agentsv1alpha1.PendingSourceExit && !t.Active {
		c.Cause = agentsv1alpha1.PlanModeChangeApproval
		if rs := sc.session.Status.Review; rs != nil && rs.Phase == agentsv1alpha1.ReviewApproved {
			c.Revision, c.By = rs.Revision, lastApprover(rs)
		}
		by = fmt.Sprintf("the approval of revision %d", c.Revision)
	} else if sel := sc.session.Spec.PlanMode; sel.Active != nil && *sel.Active == t.Active && sel.SelectedBy != nil {
		c.By = sel.SelectedBy.DeepCopy()
		by = "selected by " + c.By.Username
	}
	changes = append(append([]agentsv1alpha1.PlanModeChange(nil), changes...), c)
	if over := len(changes) - agentsv1alpha1.MaxPlanModeChanges; over > 0 {
		changes = changes[over:]
	}
	status.PlanMode.Changes = changes
	if by == "" {
		return
	}
	for i := range sc.events {
		if e := &sc.events[i]; e.reason == EventReasonCommitted && e.note == committedNote(t.Active) {
			e.note += " (" + by + ")"
		}
	}
}

// lastApprover is the counted approver whose vote came last: the one that completed the
// approval.
func lastApprover(rs *agentsv1alpha1.ReviewStatus) *agentsv1alpha1.Actor {
	var last *agentsv1alpha1.Actor
	for i := range rs.Votes {
		if v := &rs.Votes[i]; v.Counted && v.Decision == agentsv1alpha1.ReviewApprove {
			last = v.By.DeepCopy()
		}
	}
	return last
}

// setReviewConditions shows a session whose plan waits for people as waiting, neither failed nor
// done: AwaitingReview=True, and, unless a selection already reports Reconciling, Reconciling=True
// with the same reason, so kstatus (Flux) reads InProgress and Argo CD's health check Suspended
// (config/samples/gitops). It runs after setConditions, on the review just computed.
func (sc *sessionScope) setReviewConditions(status *agentsv1alpha1.AgentSessionStatus) {
	rs, req := status.Review, agentReview(sc.session)
	gen := sc.session.Generation
	if rs == nil || req == nil || rs.ID != req.ID || rs.Phase != agentsv1alpha1.ReviewPending {
		meta.RemoveStatusCondition(&status.Conditions, agentsv1alpha1.ConditionAwaitingReview)
		if c := meta.FindStatusCondition(status.Conditions, agentsv1alpha1.ConditionReconciling); c != nil && c.Reason == agentsv1alpha1.ReasonReviewPending {
			meta.RemoveStatusCondition(&status.Conditions, agentsv1alpha1.ConditionReconciling)
		}
		return
	}
	waits := "a decision"
	if rs.ApprovalsRequired > 1 {
		missing := rs.ApprovalsRequired - rs.Approvals
		waits = fmt.Sprintf("%d more approval(s) (%d of %d, ReviewPolicy %s)", missing, rs.Approvals, rs.ApprovalsRequired, rs.Policy)
	}
	msg := fmt.Sprintf("plan review %s (revision %d) awaits %s: kubectl plan review %s -n %s", rs.ID, rs.Revision, waits, sc.session.Name, sc.session.Namespace)
	if c := rs.AgentConnected; c != nil && !*c {
		msg += "; its agent is gone (no liveness Lease renewal), so no agent waits for the decision"
	}
	cond := metav1.Condition{Type: agentsv1alpha1.ConditionAwaitingReview, Status: metav1.ConditionTrue, Reason: agentsv1alpha1.ReasonReviewPending, Message: msg, ObservedGeneration: gen}
	meta.SetStatusCondition(&status.Conditions, cond)
	if c := meta.FindStatusCondition(status.Conditions, agentsv1alpha1.ConditionReconciling); c == nil || c.Reason == agentsv1alpha1.ReasonReviewPending {
		cond.Type = agentsv1alpha1.ConditionReconciling
		meta.SetStatusCondition(&status.Conditions, cond)
	}
}

// sessionsForReviewPolicy maps a ReviewPolicy change to the sessions of its namespace with a
// plan under review: a policy changed while a review is open applies to it.
func (r *AgentSessionReconciler) sessionsForReviewPolicy(ctx context.Context, o client.Object) []reconcile.Request {
	return r.cachedSessions(ctx, "ReviewPolicy "+o.GetName(), func(s *agentsv1alpha1.AgentSession) bool {
		return s.Namespace == o.GetNamespace() && agentReview(s) != nil
	})
}
