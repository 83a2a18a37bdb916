package controllers

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// Plan review: the agent posts a plan in status.agent.review, a reviewer answers in spec.review
// naming its id, and the manager, the only writer of status.review, closes the review once with
// the text the exit tool returns.

// ReviewExpiredText is the exit tool's error when nobody answered within spec.reviewTimeout.
// The harness has no expiry; the wording follows its dismissed-review text.
func ReviewExpiredText(timeout time.Duration) string {
	return fmt.Sprintf("The plan review expired after %s without an answer; stay in plan mode, stop here, and wait for the user's message.", timeout)
}

// review answers the plan review in the status being computed. It runs after the plan-mode
// phases, on their result, and only when they did not fail (the committed state is then
// known): an approval records the silent exit as the pending selection (source Exit, never
// narrated), which the agent's next step boundary appends. It asks to look again when a
// pending review expires: no API event marks that moment.
func (sc *sessionScope) review(status *agentsv1alpha1.AgentSessionStatus) ctrl.Result {
	req := agentReview(sc.session)
	if req == nil {
		reviewWithdrawn(status)
		return ctrl.Result{}
	}
	now := sc.r.now()
	if status.Review == nil || status.Review.ID != req.ID {
		if !sc.openReview(status, req, now) {
			return ctrl.Result{}
		}
	}
	if status.Review.Phase != agentsv1alpha1.ReviewPending {
		return ctrl.Result{} // closed once; a later spec.review never reopens it
	}
	if sc.decideReview(status, req, now) {
		return ctrl.Result{}
	}
	return sc.expireReview(status, req, now)
}

// approvalExits reports that this generation's spec carries an approval that the review will
// turn into the silent exit: an exact Approve naming the plan under review, whose review is
// still open (or is opened now, in committed plan mode). The webhook makes an approval set
// spec.planMode.active to false in the same write; that false is the same exit, so it must not
// also become a narrated user selection (queued, or appended between turns with a notice).
func (sc *sessionScope) approvalExits() bool {
	d, req := sc.session.Spec.Review, agentReview(sc.session)
	if d == nil || d.Decision != agentsv1alpha1.ReviewApprove || d.Feedback != "" || req == nil || req.ID != d.ReviewID {
		return false
	}
	if rs := sc.session.Status.Review; rs != nil && rs.ID == req.ID {
		return rs.Phase == agentsv1alpha1.ReviewPending && sc.refuseDecision(rs.PlanSHA256, req, d) == nil
	}
	// openReview admits the plan only in committed plan mode, for a turn of this session's log.
	return sc.tail.Active && sc.reviewNotOfThisSession(req) == nil && sc.refuseDecision(planmode.PlanSHA256(req.Plan), req, d) == nil
}

func agentReview(s *agentsv1alpha1.AgentSession) *agentsv1alpha1.PlanReviewRequest {
	if s.Status.Agent == nil {
		return nil
	}
	return s.Status.Agent.Review
}

// reviewWithdrawn drops a pending review the agent no longer waits for (it cleared
// status.agent.review after its own timeout); a closed review stays as the record.
func reviewWithdrawn(status *agentsv1alpha1.AgentSessionStatus) {
	if rs := status.Review; rs != nil && rs.Phase == agentsv1alpha1.ReviewPending {
		status.Review = nil
	}
}

// openReview starts answering a newly posted plan. exit_plan_mode is admitted only while the
// committed state (the log's last plan/mode) is active; a plan posted outside it is refused.
func (sc *sessionScope) openReview(status *agentsv1alpha1.AgentSessionStatus, req *agentsv1alpha1.PlanReviewRequest, now metav1.Time) bool {
	if !sc.tail.Active {
		status.Review = &agentsv1alpha1.ReviewStatus{ID: req.ID, Phase: agentsv1alpha1.ReviewRejected, Message: harness.ExitErrNotInPlanMode, DecidedAt: &now}
		sc.emit(corev1.EventTypeWarning, EventReasonReviewRejected, "Review",
			fmt.Sprintf("plan review %s refused: plan mode is not committed in the session log", req.ID))
		return false
	}
	if refusal := sc.reviewNotOfThisSession(req); refusal != nil { // review_binding.go
		status.Review = &agentsv1alpha1.ReviewStatus{ID: req.ID, Phase: agentsv1alpha1.ReviewRejected, Message: refusal.Error(), DecidedAt: &now}
		sc.emit(corev1.EventTypeWarning, EventReasonReviewRejected, "Review", fmt.Sprintf("plan review %s refused: %s", req.ID, refusal))
		return false
	}
	status.Review = &agentsv1alpha1.ReviewStatus{ID: req.ID, Phase: agentsv1alpha1.ReviewPending, PlanSHA256: planmode.PlanSHA256(req.Plan)}
	sc.emit(corev1.EventTypeNormal, EventReasonReviewOpened, "Review",
		fmt.Sprintf("plan %q posted for review %s (turn %d): decide with kubectl plan approve|revise|dismiss %s", planmode.PlanTitle(req.Plan), req.ID, req.Turn, sc.session.Name))
	return true
}

// decideReview applies spec.review when it names the plan under review. Consent is exactly one
// thing: decision Approve with no feedback. Approve carrying feedback is feedback, not consent,
// so it reads as keep-planning with that feedback.
func (sc *sessionScope) decideReview(status *agentsv1alpha1.AgentSessionStatus, req *agentsv1alpha1.PlanReviewRequest, now metav1.Time) bool {
	d := sc.session.Spec.Review
	if d == nil || d.ReviewID != req.ID {
		return false // no decision, or one for another (older) plan: never applies to this one
	}
	rs := status.Review
	if refusal := sc.refuseDecision(rs.PlanSHA256, req, d); refusal != nil { // review_binding.go
		sc.emitDecisionRefused(refusal)
		return false
	}
	switch {
	case d.Decision == agentsv1alpha1.ReviewApprove && d.Feedback == "":
		rs.Phase, rs.Message = agentsv1alpha1.ReviewApproved, harness.ExitApprovedText
		recordApprovedExit(&status.PlanMode, sc.openTurn())
	case d.Decision == agentsv1alpha1.ReviewApprove, d.Decision == agentsv1alpha1.ReviewKeepPlanning:
		rs.Phase, rs.Message = agentsv1alpha1.ReviewKeptPlanning, harness.KeepPlanningText(d.Feedback)
	case d.Decision == agentsv1alpha1.ReviewDismiss:
		rs.Phase, rs.Message = agentsv1alpha1.ReviewDismissed, harness.ExitErrDismissed
	default:
		return false // unknown decision: the CRD enum and the webhook refuse it; wait
	}
	rs.DecidedAt = &now
	sc.emit(corev1.EventTypeNormal, EventReasonReviewDecided, "Review",
		fmt.Sprintf("plan review %s: %s", req.ID, rs.Phase))
	return true
}

// recordApprovedExit is the harness's approval: pending := {active:false, narrate:false},
// overwriting any user pending. Nothing is appended now; the next step boundary appends
// plan/mode {false} with no notice (the tool result is the narration).
func recordApprovedExit(pm *agentsv1alpha1.PlanModeStatus, turn int64) {
	f := false
	pm.PendingActive = &f
	pm.PendingSource = agentsv1alpha1.PendingSourceExit
	pm.QueuedInTurn = turn
	pm.Pending = pm.Active
}

// expireReview closes a review nobody answered within spec.reviewTimeout (counted from the
// agent's requestedAt), and otherwise records when it will expire and asks to look again then.
func (sc *sessionScope) expireReview(status *agentsv1alpha1.AgentSessionStatus, req *agentsv1alpha1.PlanReviewRequest, now metav1.Time) ctrl.Result {
	rs := status.Review
	to := sc.session.Spec.ReviewTimeout
	if to == nil || to.Duration <= 0 {
		rs.ExpiresAt = nil
		return ctrl.Result{}
	}
	var deadline metav1.Time
	switch {
	case req.RequestedAt != nil:
		deadline = metav1.NewTime(req.RequestedAt.Add(to.Duration))
	case rs.ExpiresAt != nil:
		deadline = *rs.ExpiresAt
	default:
		deadline = metav1.NewTime(now.Add(to.Duration))
	}
	if now.Before(&deadline) {
		rs.ExpiresAt = &deadline
		// Land just after the deadline, not on it.
		return ctrl.Result{RequeueAfter: deadline.Sub(now.Time) + 10*time.Millisecond}
	}
	rs.Phase, rs.Message, rs.DecidedAt, rs.ExpiresAt = agentsv1alpha1.ReviewExpired, ReviewExpiredText(to.Duration), &now, &deadline
	sc.emit(corev1.EventTypeNormal, EventReasonReviewExpired, "Review",
		fmt.Sprintf("plan review %s expired after %s without an answer", req.ID, to.Duration))
	return ctrl.Result{}
}
