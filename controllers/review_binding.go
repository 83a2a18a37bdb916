package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// A review is bound to its session and to its text. The manager opens a review only for a plan
// that names a turn the session's log has had (exit_plan_mode is a tool call inside a turn of
// this log, so a genuine plan always does), under a review id that has named no other text in
// this session (status.reviewHistory), records the digest of the text it opened, and counts a
// decision only for that text: a decision that names another digest does not count, and a plan
// changed under its review id is decided by nothing, each with a Warning Event; the review
// stays open. The admission webhook refuses these earlier; this holds without it.

// reviewNotOfThisSession refuses a posted plan that is not this session's to review, saying
// why; nil when it is. A plan may be reviewed after its turn ended (approved between turns), so
// only a turn the log has not reached marks it as another's.
func (sc *sessionScope) reviewNotOfThisSession(req *agentsv1alpha1.PlanReviewRequest) error {
	if req.Turn <= sc.tail.Turn {
		return nil
	}
	return fmt.Errorf("exit_plan_mode was refused: the plan names turn %d, and this session's log has reached turn %d", req.Turn, sc.tail.Turn)
}

// planChanged refuses every decision on the plan under review, saying why, when its text changed
// under its review id after the review opened with the digest recorded; nil otherwise ("" is a
// review opened before digests were recorded: the posted plan's is taken then).
func (sc *sessionScope) planChanged(recorded string, req *agentsv1alpha1.PlanReviewRequest) error {
	posted := planmode.PlanSHA256(req.Plan)
	if recorded == "" || posted == recorded {
		return nil
	}
	return fmt.Errorf("the plan under review %s changed after it was posted (sha256 %s, opened as %s): "+
		"no decision applies to it; the agent must post it under a new review id", req.ID, posted, recorded)
}

func (sc *sessionScope) emitDecisionRefused(refusal error) {
	sc.emitSeries(corev1.EventTypeWarning, EventReasonReviewDecisionRefused, "Review", refusal.Error())
}

// idReusedFor is the recorded revision whose review id req reuses with another text, or nil.
// The record keeps the last MaxReviewHistory revisions; an id older than that is forgotten, and
// the decisions stay bound to the digest of the text read, so a text posted under a forgotten
// id still needs its own decision (docs/review.md, "Integrity").
func (sc *sessionScope) idReusedFor(req *agentsv1alpha1.PlanReviewRequest) *agentsv1alpha1.ReviewRevision {
	digest := planmode.PlanSHA256(req.Plan)
	for i := range sc.session.Status.ReviewHistory {
		if rev := &sc.session.Status.ReviewHistory[i]; rev.ReviewID == req.ID && rev.PlanSHA256 != digest {
			return rev
		}
	}
	return nil
}

// reopenRevision reopens the recorded revision of req (the same id and text, posted again after
// the agent withdrew it), or returns nil when req is a new revision.
func reopenRevision(status *agentsv1alpha1.AgentSessionStatus, req *agentsv1alpha1.PlanReviewRequest, digest string, now metav1.Time) *agentsv1alpha1.ReviewRevision {
	for i := range status.ReviewHistory {
		rev := &status.ReviewHistory[i]
		if rev.ReviewID == req.ID && rev.PlanSHA256 == digest && rev.Phase == agentsv1alpha1.ReviewWithdrawn {
			rev.Phase, rev.DecidedAt, rev.DecidedBy, rev.PostedAt = agentsv1alpha1.ReviewPending, nil, nil, now
			return rev
		}
	}
	return nil
}

// nextRevision is the number of the session's next posted plan.
func nextRevision(status *agentsv1alpha1.AgentSessionStatus) int64 {
	var n int64
	for _, rev := range status.ReviewHistory {
		n = max(n, rev.Revision)
	}
	if rs := status.Review; rs != nil {
		n = max(n, rs.Revision)
	}
	return n + 1
}

// addRevision records revision n, dropping the oldest beyond MaxReviewHistory.
func addRevision(status *agentsv1alpha1.AgentSessionStatus, req *agentsv1alpha1.PlanReviewRequest, n int64, digest string, now metav1.Time) {
	h := append(status.ReviewHistory, agentsv1alpha1.ReviewRevision{
		Revision: n, ReviewID: req.ID, PlanSHA256: digest, Title: revisionTitle(req.Plan), PostedAt: now, Phase: agentsv1alpha1.ReviewPending,
	})
	if over := len(h) - agentsv1alpha1.MaxReviewHistory; over > 0 {
		h = append([]agentsv1alpha1.ReviewRevision(nil), h[over:]...)
	}
	status.ReviewHistory = h
}

// closeRevision records how revision rs ended, and who ended it.
func closeRevision(status *agentsv1alpha1.AgentSessionStatus, rs *agentsv1alpha1.ReviewStatus, phase agentsv1alpha1.ReviewPhase, by []string, now metav1.Time) {
	for i := range status.ReviewHistory {
		if rev := &status.ReviewHistory[i]; rev.Revision == rs.Revision && rev.ReviewID == rs.ID {
			rev.Phase, rev.DecidedAt = phase, &now
			rev.DecidedBy = nil
			if len(by) > 0 {
				rev.DecidedBy = append([]string(nil), by[:min(len(by), agentsv1alpha1.MaxReviewVotes)]...)
			}
		}
	}
}

// revisionTitle is the plan's heading, cut to MaxRevisionTitleBytes on a character boundary.
func revisionTitle(plan string) string {
	t := planmode.PlanTitle(plan)
	if len(t) <= agentsv1alpha1.MaxRevisionTitleBytes {
		return t
	}
	cut := agentsv1alpha1.MaxRevisionTitleBytes
	for cut > 0 && t[cut]&0xC0 == 0x80 {
		cut--
	}
	return t[:cut]
}

// isNoKindMatch: the ReviewPolicy API is not installed (CRDs older than the manager): no
// namespace has a policy.
func isNoKindMatch(err error) bool { return err != nil && meta.IsNoMatchError(err) }
