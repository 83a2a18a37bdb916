package reviewpolicy

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

const plan = "# Plan\n\n1. Read parser.go\n"

var digest = planmode.PlanSHA256(plan)

func vote(user string, d v1alpha1.ReviewDecisionType, at int, groups ...string) v1alpha1.ReviewDecision {
	t := metav1.NewTime(time.Unix(1000+int64(at), 0))
	return v1alpha1.ReviewDecision{ReviewID: "r1", Decision: d, PlanSHA256: digest, DecidedBy: &v1alpha1.Actor{Username: user, Groups: groups}, DecidedAt: &t}
}

func session(votes ...v1alpha1.ReviewDecision) *v1alpha1.AgentSession {
	on := true
	return &v1alpha1.AgentSession{
		Spec: v1alpha1.AgentSessionSpec{
			PlanMode:    v1alpha1.PlanModeSpec{Active: &on, SelectedBy: &v1alpha1.Actor{Username: "tom"}},
			ReviewVotes: votes,
		},
		Status: v1alpha1.AgentSessionStatus{Agent: &v1alpha1.AgentReport{Review: &v1alpha1.PlanReviewRequest{ID: "r1", Plan: plan}}},
	}
}

func policy(spec v1alpha1.ReviewPolicySpec) Rules {
	return RulesOf(&v1alpha1.ReviewPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "team-a"}, Spec: spec})
}

func judge(s *v1alpha1.AgentSession, r Rules) Verdict {
	req := s.Status.Agent.Review
	return Judge(s, req, digest, RequesterOf(s, req), r)
}

func TestNoPolicyIsOneApprovalByAnyone(t *testing.T) {
	v := judge(session(vote("tom", v1alpha1.ReviewApprove, 1)), RulesOf(nil))
	if !v.Approved() || v.Missing() != 0 {
		t.Fatalf("no policy: the requester's one approval approves; got %+v", v)
	}
}

func TestTwoApproversSelfApprovalForbidden(t *testing.T) {
	r := policy(v1alpha1.ReviewPolicySpec{Approvals: 2, SelfApproval: v1alpha1.SelfApprovalForbidden})
	s := session(vote("tom", v1alpha1.ReviewApprove, 1))
	v := judge(s, r)
	if v.Approved() || v.Missing() != 2 || v.Votes[0].Counted {
		t.Fatalf("the requester's approval must not count: %+v", v)
	}
	if got := v.Votes[0].Refusal.String(); !strings.Contains(got, `"tom" selected plan mode for this work`) || !strings.Contains(got, "spec.selfApproval: Forbidden") {
		t.Errorf("refusal %q does not name the rule", got)
	}
	s.Spec.ReviewVotes = append(s.Spec.ReviewVotes, vote("rita", v1alpha1.ReviewApprove, 2))
	if v = judge(s, r); v.Approved() || v.Missing() != 1 {
		t.Fatalf("one approval of two: %+v", v)
	}
	s.Spec.ReviewVotes = append(s.Spec.ReviewVotes, vote("rita", v1alpha1.ReviewApprove, 3))
	if v = judge(s, r); v.Missing() != 1 || v.Votes[2].Counted {
		t.Fatalf("the same approver twice counts once: %+v", v)
	}
	s.Spec.ReviewVotes = append(s.Spec.ReviewVotes, vote("sam", v1alpha1.ReviewApprove, 4))
	if v = judge(s, r); !v.Approved() || strings.Join(v.Approvers, ",") != "rita,sam" {
		t.Fatalf("two distinct approvers approve: %+v", v)
	}
}

func TestKeepPlanningClosesWhateverTheApprovals(t *testing.T) {
	r := policy(v1alpha1.ReviewPolicySpec{Approvals: 2})
	s := session(vote("rita", v1alpha1.ReviewApprove, 1), vote("sam", v1alpha1.ReviewKeepPlanning, 2), vote("ann", v1alpha1.ReviewApprove, 3))
	v := judge(s, r)
	if v.Approved() || v.Closing == nil || v.Closing.DecidedBy.Username != "sam" {
		t.Fatalf("a counted keep-planning closes the review: %+v", v)
	}
}

func TestApproversAndDigest(t *testing.T) {
	r := policy(v1alpha1.ReviewPolicySpec{Approvals: 1, Approvers: &v1alpha1.Approvers{Users: []string{"rita"}, Groups: []string{"platform"}}})
	if v := judge(session(vote("sam", v1alpha1.ReviewApprove, 1)), r); v.Approved() || !strings.Contains(v.Votes[0].Refusal.Rule, "lets only users rita and members of platform approve") {
		t.Fatalf("an unlisted approver must not count: %+v", v.Votes)
	}
	if v := judge(session(vote("sam", v1alpha1.ReviewApprove, 1, "platform")), r); !v.Approved() {
		t.Fatalf("a member of a listed group counts: %+v", v.Votes)
	}
	other := vote("rita", v1alpha1.ReviewApprove, 1)
	other.PlanSHA256 = planmode.PlanSHA256("# Other\n")
	if v := judge(session(other), r); v.Approved() || !strings.Contains(v.Votes[0].Refusal.Rule, "taken on another text") {
		t.Fatalf("an approval of another text must not count: %+v", v.Votes)
	}
	bare := vote("rita", v1alpha1.ReviewApprove, 1)
	bare.PlanSHA256 = ""
	if v := judge(session(bare), r); v.Approved() || !strings.Contains(v.Votes[0].Refusal.Rule, "must name the SHA-256") {
		t.Fatalf("an approval naming no digest must not count by default: %+v", v.Votes)
	}
	r.AllowWithoutDigest = true
	if v := judge(session(bare), r); !v.Approved() {
		t.Fatalf("allowApprovalWithoutDigest counts it: %+v", v.Votes)
	}
}

func TestUnstampedCountsOnlyWhereIdentityDoesNotMatter(t *testing.T) {
	d := vote("", v1alpha1.ReviewApprove, 1)
	d.DecidedBy, d.DecidedAt = nil, nil
	s := session()
	s.Spec.Review = &d
	if v := judge(s, RulesOf(nil)); !v.Approved() {
		t.Fatalf("without a policy an unstamped approval (written before stamping) counts: %+v", v.Votes)
	}
	if v := judge(s, policy(v1alpha1.ReviewPolicySpec{Approvals: 2})); v.Approved() || v.Votes[0].Counted {
		t.Fatalf("with a policy it does not: %+v", v.Votes)
	}
}
