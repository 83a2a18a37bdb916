package plancli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// The inbox lists only plans waiting for a decision, oldest first by the manager's clock, with
// what each waits for.
func TestInbox(t *testing.T) {
	opened := func(name, ns string, at time.Duration, rs v1alpha1.ReviewStatus) v1alpha1.AgentSession {
		as := underReviewSession("# Plan of " + name + "\x1b[2K\n")
		as.Name, as.Namespace = name, ns
		t := metav1.NewTime(changed.Add(at))
		rs.ID, rs.OpenedAt = "r1", &t
		as.Status.Review = &rs
		return *as
	}
	decided := opened("done", "team-a", 0, v1alpha1.ReviewStatus{Phase: v1alpha1.ReviewApproved})
	items := awaitingReview([]v1alpha1.AgentSession{
		opened("newer", "team-a", 2*time.Minute, v1alpha1.ReviewStatus{Phase: v1alpha1.ReviewPending, Revision: 3, ApprovalsRequired: 1}),
		decided,
		opened("older", "team-b", time.Minute, v1alpha1.ReviewStatus{Phase: v1alpha1.ReviewPending, Revision: 1, ApprovalsRequired: 2, Approvals: 1,
			Requester: &v1alpha1.Actor{Username: "tom"}, SelfApproval: v1alpha1.SelfApprovalForbidden,
			Votes: []v1alpha1.ReviewVoteStatus{{Decision: v1alpha1.ReviewApprove, By: v1alpha1.Actor{Username: "rita"}, Counted: true}}}),
	})
	var b strings.Builder
	if err := writeInbox(&b, items, true, changed.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	want := "NAMESPACE   NAME    REVISION   AGE   PLAN                   WAITING FOR\n" +
		"team-b      older   1          59m   Plan of older\\x1b[2K   1 more approval needed (1 of 2) from anyone but rita (approved), tom (the requester)\n" +
		"team-a      newer   3          58m   Plan of newer\\x1b[2K   a decision\n"
	if got := b.String(); got != want {
		t.Errorf("inbox:\n%s\nwant:\n%s", got, want)
	}
}
