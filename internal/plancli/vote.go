package plancli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/reviewpolicy"
	"github.com/harness-dev/planmode-operator/internal/termtext"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// A decision is a vote appended to spec.reviewVotes with a JSON patch: the API server applies
// the append to the object as it stands, so two reviewers deciding at the same moment both
// land (a merge patch of the list would let the second replace the first). The patch also
// tests that the plan voted on is still the one under review, so a vote never lands on a plan
// posted after it was read. The admission webhook stamps who decided, and when.

// appendVote appends vote to the session's spec.reviewVotes, if the plan under review is still
// vote.ReviewID, and with deselect sets spec.planMode.active to false in the same write; it
// returns the object as stored.
func (o *Options) appendVote(ctx context.Context, as *v1alpha1.AgentSession, vote v1alpha1.ReviewDecision, deselect bool, why string) (*v1alpha1.AgentSession, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	const test, add = "test", "add" // JSON Patch operations
	ops := []op{{test, "/status/agent/review/id", vote.ReviewID}}
	if len(as.Spec.ReviewVotes) == 0 {
		// The list does not exist yet: create it, unless another vote created it meanwhile
		// (the test of null then fails, and the vote is appended on a fresh read).
		ops = append(ops, op{test, "/spec/reviewVotes", nil}, op{add, "/spec/reviewVotes", []v1alpha1.ReviewDecision{vote}})
	} else {
		ops = append(ops, op{add, "/spec/reviewVotes/-", vote})
	}
	if deselect {
		ops = append(ops, op{test, "/spec/planMode/active", true}, op{add, "/spec/planMode/active", false})
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encode the patch: %w", err)
	}
	obj := as.DeepCopy()
	if err := o.c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, raw), client.FieldOwner(FieldManager)); err != nil {
		if voteRaced(err) || deselect && notLastApproval(err) {
			return nil, err // retried by the caller (on a fresh read, or without deselecting)
		}
		return nil, o.explain(err, as.Name, "patch", why)
	}
	return obj, nil
}

// voteRaced reports a vote that lost a race: a conflict, or a failed "test" operation (the API
// server answers an unprocessable patch that names no field).
func voteRaced(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	if !apierrors.IsInvalid(err) {
		return false
	}
	msg := apiMessage(err)
	return strings.Contains(msg, "testing value") || strings.Contains(msg, "test operation")
}

// completesApproval reports that an approval of plan r would complete its review, as far as the
// plugin can tell (the manager's count of what it needs, the votes in spec): the approving write
// then also deselects plan mode (docs/review.md, "Approving leaves plan mode"). The admission
// webhook does the same where it is installed, and refuses a deselection by an approval that
// does not complete the review (notLastApproval).
func completesApproval(as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest) bool {
	if a := as.Spec.PlanMode.Active; a == nil || !*a {
		return false
	}
	rules := reviewpolicy.Rules{Approvals: 1, AllowWithoutDigest: true}
	if rs := reviewOf(as, r); rs != nil && rs.ApprovalsRequired > 0 {
		rules.Approvals = rs.ApprovalsRequired
	}
	v := reviewpolicy.Judge(as, r, postedDigest(as, r), nil, rules)
	return v.Closing == nil && int32(len(v.Approvers))+1 >= rules.Approvals
}

// notLastApproval reports the webhook's refusal of a deselection by an approval that does not
// complete its review (another approval is still needed).
func notLastApproval(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(apiMessage(err), "is not the last one the review needs")
}

// newestVote finds, in the stored object, the vote just appended (the one the webhook stamped
// last with these fields).
func newestVote(obj *v1alpha1.AgentSession, sent v1alpha1.ReviewDecision) *v1alpha1.ReviewDecision {
	var found *v1alpha1.ReviewDecision
	for i := range obj.Spec.ReviewVotes {
		v := &obj.Spec.ReviewVotes[i]
		if v.ReviewID == sent.ReviewID && v.Decision == sent.Decision && v.PlanSHA256 == sent.PlanSHA256 && v.Feedback == sent.Feedback {
			if found == nil || v.DecidedAt != nil && (found.DecidedAt == nil || !v.DecidedAt.Before(found.DecidedAt)) {
				found = v
			}
		}
	}
	return found
}

// recordedVote is the manager's record of vote mine in review rs, or nil when it has not read it.
func recordedVote(rs *v1alpha1.ReviewStatus, mine *v1alpha1.ReviewDecision) *v1alpha1.ReviewVoteStatus {
	for i := range rs.Votes {
		v := &rs.Votes[i]
		if v.Decision != mine.Decision {
			continue
		}
		if mine.DecidedBy == nil || v.By.Username == mine.DecidedBy.Username {
			return v
		}
	}
	return nil
}

// stillNeeded says how many approvals review id still needs after the manager counted ours:
// "1 more approval needed (ReviewPolicy team-a/default needs 2 distinct approvers)", or "".
func stillNeeded(rs *v1alpha1.ReviewStatus, id string) string {
	if rs == nil || rs.ID != id || rs.Phase != v1alpha1.ReviewPending || rs.Approvals >= rs.ApprovalsRequired {
		return ""
	}
	return fmt.Sprintf("%s (%s)", approvalsNeededText(rs.ApprovalsRequired-rs.Approvals), policyText(rs))
}

func approvalsNeededText(n int32) string {
	if n == 1 {
		return "1 more approval needed"
	}
	return fmt.Sprintf("%d more approvals needed", n)
}

// policyText names the policy of review rs and what it asks for.
func policyText(rs *v1alpha1.ReviewStatus) string {
	if rs.Policy == "" {
		return "no ReviewPolicy: one approval"
	}
	return fmt.Sprintf("ReviewPolicy %s needs %d distinct approvers", rs.Policy, rs.ApprovalsRequired)
}

// decided reports the decision that already closed review r, or that does once the manager
// applies it, if any. Without the manager's count of what the review needs, one approval is
// taken to be enough (no ReviewPolicy).
func decided(as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest) (string, bool) {
	rs := as.Status.Review
	if rs != nil && rs.ID == r.ID && rs.Phase != v1alpha1.ReviewPending {
		return string(rs.Phase), true
	}
	rules := reviewpolicy.Rules{Approvals: 1, AllowWithoutDigest: true}
	if rs != nil && rs.ID == r.ID && rs.ApprovalsRequired > 0 {
		rules.Approvals = rs.ApprovalsRequired
	}
	v := reviewpolicy.Judge(as, r, postedDigest(as, r), nil, rules)
	switch {
	case v.Closing != nil:
		return string(v.Closing.Decision), true
	case v.Approved():
		return string(v1alpha1.ReviewApprove), true
	}
	return "", false
}

// postedDigest is the digest the manager recorded for plan r, or the posted text's.
func postedDigest(as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest) string {
	if rs := as.Status.Review; rs != nil && rs.ID == r.ID && rs.PlanSHA256 != "" {
		return rs.PlanSHA256
	}
	return planmode.PlanSHA256(r.Plan)
}

// revisionOf is the revision number the manager gave plan r; 0 before it has seen it.
func revisionOf(as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest) int64 {
	if rs := as.Status.Review; rs != nil && rs.ID == r.ID {
		return rs.Revision
	}
	return 0
}

func revisionWord(n int64) string {
	if n == 0 {
		return "the plan"
	}
	return fmt.Sprintf("revision %d", n)
}

// checkRevision stops a decision bound to --revision n unless n is the plan under review, as
// the manager numbered and recorded it (status.review, which agents cannot write).
func checkRevision(name string, as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest, digest string, n int64) error {
	rs := as.Status.Review
	switch {
	case rs == nil || rs.ID != r.ID || rs.Revision == 0:
		return fmt.Errorf("the plan under review (review %s) has no revision number yet (the manager has not opened its review); nothing was decided. Read it with: kubectl plan review %s", r.ID, name)
	case rs.Revision != n:
		return fmt.Errorf("revision %d is not the plan under review: revision %d (%q, review %s) is; nothing was decided. Read it with: kubectl plan review %s",
			n, rs.Revision, termtext.Line(planTitle(r.Plan)), r.ID, name)
	case rs.PlanSHA256 != "" && rs.PlanSHA256 != digest:
		return fmt.Errorf("the plan under review %s is not the text of revision %d (SHA-256 %s, recorded %s); nothing was decided. Read it again with: kubectl plan review %s",
			r.ID, n, digest, rs.PlanSHA256, name)
	}
	return nil
}
