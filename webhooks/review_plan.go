package webhooks

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/termtext"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// validatePostedPlan checks a plan the agent posts (or posts again) in status.agent.review: it
// holds no control character other than newline and tab, so the text a reviewer's terminal
// shows is the text approved (a carriage return, an ANSI or OSC escape sequence could hide or
// rewrite lines), and it does not reuse a review id this session posted another text under
// (status.reviewHistory): a review id names one text forever.
func validatePostedPlan(oldObj, obj *agentsv1alpha1.AgentSession) field.ErrorList {
	n := agentReview(obj)
	if n == nil {
		return nil
	}
	if o := agentReview(oldObj); o != nil && o.ID == n.ID && o.Plan == n.Plan {
		return nil // unchanged (another part of status.agent was written)
	}
	p := field.NewPath("status", "agent", "review", "plan")
	if off, r := termtext.FirstControl(n.Plan); off >= 0 {
		return field.ErrorList{field.Invalid(p, excerpt(n.Plan, off), fmt.Sprintf(
			"holds the control character %s at byte offset %d: a posted plan may contain no control characters other than newline (\\n) and tab (\\t), "+
				"since they could make what a reviewer's terminal shows differ from the text approved; remove it (and use \\n line endings, not \\r\\n)",
			termtext.Name(r), off))}
	}
	digest := planmode.PlanSHA256(n.Plan)
	for _, rev := range obj.Status.ReviewHistory {
		if rev.ReviewID == n.ID && rev.PlanSHA256 != digest {
			return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
				"review id %q was already used for another text (revision %d, sha256 %s): a review id names one text forever; post the changed plan under a new review id",
				n.ID, rev.Revision, rev.PlanSHA256))}
		}
	}
	return nil
}

// excerpt is the text around byte offset off, escaped, for an error message.
func excerpt(s string, off int) string {
	from, to := max(0, off-24), min(len(s), off+24)
	for from > 0 && !utf8.RuneStart(s[from]) {
		from--
	}
	for to < len(s) && !utf8.RuneStart(s[to]) {
		to++
	}
	return "…" + termtext.Line(s[from:to]) + "…"
}
