package plancli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/termtext"
)

// reviewOf is the manager's record of the review of plan r, or nil before it opened it.
func reviewOf(as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest) *v1alpha1.ReviewStatus {
	if rs := as.Status.Review; rs != nil && r != nil && rs.ID == r.ID {
		return rs
	}
	return nil
}

// revisionOfHistory is the recorded revision n of the session, or nil.
func revisionOfHistory(as *v1alpha1.AgentSession, n int64) *v1alpha1.ReviewRevision {
	for i := range as.Status.ReviewHistory {
		if as.Status.ReviewHistory[i].Revision == n {
			return &as.Status.ReviewHistory[i]
		}
	}
	return nil
}

// revisionLine is "2 (after revision 1, KeepPlanning by rita@example.com: kubectl plan review
// demo --diff shows what changed)".
func revisionLine(as *v1alpha1.AgentSession, rs *v1alpha1.ReviewStatus, name string) string {
	if rs.Revision == 1 {
		return "1 (the session's first plan)"
	}
	prev := revisionOfHistory(as, rs.Revision-1)
	if prev == nil {
		return fmt.Sprintf("%d (earlier revisions are no longer recorded)", rs.Revision)
	}
	s := fmt.Sprintf("%d (after revision %d, %s", rs.Revision, prev.Revision, prev.Phase)
	if len(prev.DecidedBy) > 0 {
		s += " by " + termtext.Line(strings.Join(prev.DecidedBy, ", "))
	}
	return s + fmt.Sprintf(": kubectl plan review %s --diff shows what changed)", name)
}

// postedLine says when the plan was posted and by whom: the manager's clock once it has seen
// the plan (expiry counts from there), the agent's before.
func postedLine(rs *v1alpha1.ReviewStatus, r *v1alpha1.PlanReviewRequest) string {
	if rs != nil && rs.OpenedAt != nil {
		s := rs.OpenedAt.UTC().Format(time.RFC3339)
		if rs.PostedBy != "" {
			s += " by " + termtext.Line(rs.PostedBy)
		}
		return s
	}
	if r.RequestedAt != nil {
		return r.RequestedAt.UTC().Format(time.RFC3339) + " (the agent's clock: the manager has not opened the review yet)"
	}
	return ""
}

// expiresAt is when the review expires, by the manager's clock.
func expiresAt(as *v1alpha1.AgentSession, rs *v1alpha1.ReviewStatus, _ *v1alpha1.PlanReviewRequest) string {
	switch {
	case rs != nil && rs.ExpiresAt != nil:
		return rs.ExpiresAt.UTC().Format(time.RFC3339)
	case as.Spec.ReviewTimeout != nil:
		return fmt.Sprintf("%s after the manager opens the review", as.Spec.ReviewTimeout.Duration)
	}
	return ""
}

// votesLine lists the decisions the manager read, with whether each counts.
func votesLine(votes []v1alpha1.ReviewVoteStatus) string {
	parts := make([]string, 0, len(votes))
	for _, v := range votes {
		s := termtext.Line(v.By.Username) + " " + string(v.Decision)
		if v.At != nil {
			s += " at " + v.At.UTC().Format(time.RFC3339)
		}
		if !v.Counted {
			s += " (not counted: " + termtext.Line(v.Reason) + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// decidersOf names who closed review rs (status.reviewHistory records them).
func decidersOf(as *v1alpha1.AgentSession, rs *v1alpha1.ReviewStatus) string {
	if rev := revisionOfHistory(as, rs.Revision); rev != nil && rev.ReviewID == rs.ID {
		return termtext.Line(strings.Join(rev.DecidedBy, ", "))
	}
	return ""
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// agentGoneText is "; the agent is gone (no liveness Lease renewal since T): no agent waits for
// the decision" when the manager found the plan's agent gone, or "".
func agentGoneText(rs *v1alpha1.ReviewStatus) string {
	if rs == nil || rs.AgentConnected == nil || *rs.AgentConnected {
		return ""
	}
	since := ""
	if rs.AgentRenewedAt != nil {
		since = " since " + rs.AgentRenewedAt.UTC().Format(time.RFC3339)
	}
	return "; the agent is gone (no liveness Lease renewal" + since + "): no agent waits for the decision"
}
