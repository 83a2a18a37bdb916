package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// A review is bound to its session and to its text. The manager opens a review only for a plan
// that names a turn the session's log has had (exit_plan_mode is a tool call inside a turn of
// this log, so a genuine plan always does), records the digest of the text it opened, and
// applies a decision only to that text: a decision that names another digest, or a plan
// changed under its review id, is refused with a Warning Event and the review stays open. The
// admission webhook refuses both earlier; this holds without it.

// reviewNotOfThisSession refuses a posted plan that is not this session's to review, saying
// why; nil when it is. A plan may be reviewed after its turn ended (approved between turns), so
// only a turn the log has not reached marks it as another's.
func (sc *sessionScope) reviewNotOfThisSession(req *agentsv1alpha1.PlanReviewRequest) error {
	if req.Turn <= sc.tail.Turn {
		return nil
	}
	return fmt.Errorf("exit_plan_mode was refused: the plan names turn %d, and this session's log has reached turn %d", req.Turn, sc.tail.Turn)
}

// refuseDecision refuses decision d for the plan under review, saying why; nil when d may
// decide it. recorded is the digest the review was opened with.
func (sc *sessionScope) refuseDecision(recorded string, req *agentsv1alpha1.PlanReviewRequest, d *agentsv1alpha1.ReviewDecision) error {
	posted := planmode.PlanSHA256(req.Plan)
	switch {
	case posted != recorded:
		return fmt.Errorf("the plan under review %s changed after it was posted (sha256 %s, opened as %s): "+
			"no decision applies to it; the agent must post it under a new review id", req.ID, posted, recorded)
	case d.PlanSHA256 != "" && d.PlanSHA256 != recorded:
		return fmt.Errorf("spec.review.planSHA256 %s is not the digest of the plan under review %s (%s): the decision was taken on another text; "+
			"read the plan again with kubectl plan review %s and decide again", d.PlanSHA256, req.ID, recorded, sc.session.Name)
	}
	return nil
}

func (sc *sessionScope) emitDecisionRefused(refusal error) {
	sc.emitSeries(corev1.EventTypeWarning, EventReasonReviewDecisionRefused, "Review", refusal.Error())
}
