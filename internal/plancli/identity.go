package plancli

import (
	"fmt"
	"strings"
	"time"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// Who decided and who selected: the admission webhook stamps it from the authenticated request
// (docs/review.md, "Identity"); these render it.

// planModeActors maps the seq of each plan/mode event the status still records (the last
// status.planMode.changes) to " by USER" for kubectl plan log. The log's plan/mode data stays
// exactly {active}; older events have no recorded actor.
func planModeActors(as *v1alpha1.AgentSession) map[int64]string {
	out := map[int64]string{}
	for _, c := range as.Status.PlanMode.Changes {
		switch {
		case c.Cause == v1alpha1.PlanModeChangeApproval && c.By != nil:
			out[c.Seq] = fmt.Sprintf(" by the approval of revision %d (completed by %s)", c.Revision, c.By.Username)
		case c.Cause == v1alpha1.PlanModeChangeApproval:
			out[c.Seq] = fmt.Sprintf(" by the approval of revision %d", c.Revision)
		case c.By != nil:
			out[c.Seq] = " selected by " + c.By.Username
		}
	}
	return out
}

// selectedByText is ", by USER at TIME" for the Desired row, or "".
func selectedByText(v StatusView) string {
	if v.SelectedBy == nil {
		return ""
	}
	s := ", by " + v.SelectedBy.Username
	if v.SelectedAt != nil {
		s += " at " + v.SelectedAt.Format(time.RFC3339)
	}
	return s
}

// reviewProgress is the review's approvals and deciders for the Review row: " (1 of 2
// approvals: rita@example.com)", " by rita@example.com".
func reviewProgress(v StatusView, rs *v1alpha1.ReviewStatus) string {
	if rs.Phase != v1alpha1.ReviewPending {
		for _, rev := range v.ReviewHistory {
			if rev.ReviewID == rs.ID && len(rev.DecidedBy) > 0 {
				return " by " + strings.Join(rev.DecidedBy, ", ")
			}
		}
		return ""
	}
	if rs.ApprovalsRequired <= 1 && rs.Approvals == 0 {
		return ""
	}
	var who []string
	for _, vote := range rs.Votes {
		if vote.Counted && vote.Decision == v1alpha1.ReviewApprove {
			who = append(who, vote.By.Username)
		}
	}
	s := fmt.Sprintf(" (%d of %d approvals", rs.Approvals, rs.ApprovalsRequired)
	if len(who) > 0 {
		s += ": " + strings.Join(who, ", ")
	}
	return s + "; " + approvalsNeededText(rs.ApprovalsRequired-rs.Approvals) + ")"
}

// agentLine says whether the agent of the plan under review is connected, as the manager last
// read its liveness Lease, or "" when it has no record.
func agentLine(v StatusView) string {
	rs := v.ReviewStatus
	if v.Review == nil || rs == nil || rs.ID != v.Review.ID || rs.AgentConnected == nil {
		return ""
	}
	renewed := ""
	if rs.AgentRenewedAt != nil {
		renewed = rs.AgentRenewedAt.UTC().Format(time.RFC3339)
	}
	if *rs.AgentConnected {
		return "connected (liveness Lease renewed at " + renewed + ")"
	}
	if renewed == "" {
		return "gone (its liveness Lease was released): no agent waits for the review"
	}
	return "gone (no liveness Lease renewal since " + renewed + "): no agent waits for the review"
}
