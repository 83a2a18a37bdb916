package webhooks

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

func TestValidateReviewPolicy(t *testing.T) {
	policy := func(name string, spec agentsv1alpha1.ReviewPolicySpec) *agentsv1alpha1.ReviewPolicy {
		return &agentsv1alpha1.ReviewPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	}
	for _, tc := range []struct {
		p    *agentsv1alpha1.ReviewPolicy
		want []string
	}{
		{policy("default", agentsv1alpha1.ReviewPolicySpec{Approvals: 2, SelfApproval: agentsv1alpha1.SelfApprovalForbidden,
			Approvers: &agentsv1alpha1.Approvers{Groups: []string{"platform"}}}), nil},
		{policy("strict", agentsv1alpha1.ReviewPolicySpec{Approvals: 1}), []string{`metadata.name: Invalid value: "strict": a namespace has one ReviewPolicy, named "default"`}},
		{policy("default", agentsv1alpha1.ReviewPolicySpec{Approvals: 11}), []string{`spec.approvals: Invalid value: 11: must be between 1 and 10 distinct approvers`}},
		{policy("default", agentsv1alpha1.ReviewPolicySpec{Approvals: 1, Approvers: &agentsv1alpha1.Approvers{}}),
			[]string{`spec.approvers: Required value: name at least one user or group who may approve, or remove spec.approvers`}},
		{policy("default", agentsv1alpha1.ReviewPolicySpec{Approvals: 3, Approvers: &agentsv1alpha1.Approvers{Users: []string{"rita", "sam"}}}),
			[]string{`spec.approvals: Invalid value: 3: needs 3 distinct approvers, but spec.approvers names only 2 user(s) and no group: no plan could ever be approved`}},
		{policy("default", agentsv1alpha1.ReviewPolicySpec{Approvals: 1, Approvers: &agentsv1alpha1.Approvers{Users: []string{" rita", "sam", "sam"}}}),
			[]string{`spec.approvers.users[0]: Invalid value: " rita": a username is matched exactly`, `spec.approvers.users[2]: Duplicate value: "sam"`}},
	} {
		errs := ValidateReviewPolicy(tc.p)
		if len(errs) != len(tc.want) {
			t.Errorf("%s %+v: %v, want %d errors", tc.p.Name, tc.p.Spec, errs, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(errs[i].Error(), w) {
				t.Errorf("error %d %q, want it to contain %q", i, errs[i].Error(), w)
			}
		}
	}
}

// A vote sent again, identical to the first, is a new vote: the duplicate is refused, not
// taken for the stored one.
func TestAddedVotes(t *testing.T) {
	at := metav1.NewTime(time.Unix(1000, 0))
	v := agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: agentsv1alpha1.ReviewApprove, DecidedBy: &agentsv1alpha1.Actor{Username: "rita"}, DecidedAt: &at}
	w := v
	w.DecidedBy = &agentsv1alpha1.Actor{Username: "sam"}
	for _, tc := range []struct {
		was, now []agentsv1alpha1.ReviewDecision
		want     []int
	}{
		{nil, []agentsv1alpha1.ReviewDecision{v}, []int{0}},
		{[]agentsv1alpha1.ReviewDecision{v}, []agentsv1alpha1.ReviewDecision{v, v}, []int{1}},
		{[]agentsv1alpha1.ReviewDecision{v}, []agentsv1alpha1.ReviewDecision{v, w}, []int{1}},
		{[]agentsv1alpha1.ReviewDecision{v, w}, []agentsv1alpha1.ReviewDecision{w}, nil},
	} {
		got := addedVotes(tc.was, tc.now)
		if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
			t.Errorf("addedVotes(%d, %d) = %v, want %v", len(tc.was), len(tc.now), got, tc.want)
		}
	}
}
