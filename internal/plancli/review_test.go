package plancli

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// underReviewSession has plan r1 ("Migrate the schema") under review, posted at changed, with
// a 90-minute review timeout, and no decision yet.
func underReviewSession(plan string) *v1alpha1.AgentSession {
	as := session("demo")
	posted := metav1.NewTime(changed)
	as.Spec.ReviewTimeout = &metav1.Duration{Duration: 90 * time.Minute}
	as.Spec.PlanMode.Active = bp(true)
	as.Status.PlanMode.Active = true
	as.Status.Agent = &v1alpha1.AgentReport{Review: &v1alpha1.PlanReviewRequest{ID: "r1", Turn: 4, Plan: plan, RequestedAt: &posted}}
	return as
}

func TestReviewPrintsThePlan(t *testing.T) {
	ctx := context.Background()
	c := newCLI(t, underReviewSession("# Migrate the schema\n\n1. add columns"))
	if err := c.review(ctx, "demo", false, 0); err != nil {
		t.Fatal(err)
	}
	want := "Plan:       Migrate the schema\n" +
		"Review ID:  r1\n" +
		"Turn:       4\n" +
		"SHA-256:    " + planmode.PlanSHA256("# Migrate the schema\n\n1. add columns") + "\n" +
		"Posted:     2030-01-02T03:04:05Z\n" +
		"State:      Pending, awaiting a decision (kubectl plan approve|revise|dismiss demo)\n" +
		"Expires:    2030-01-02T04:34:05Z\n" +
		"\n" +
		"# Migrate the schema\n\n1. add columns\n"
	if got := c.out.String(); got != want {
		t.Errorf("review output:\n%s\nwant:\n%s", got, want)
	}

	// --raw is the plan alone, verbatim, ending in exactly one newline.
	c.out.Reset()
	if err := c.review(ctx, "demo", true, 0); err != nil {
		t.Fatal(err)
	}
	if got := c.out.String(); got != "# Migrate the schema\n\n1. add columns\n" {
		t.Errorf("--raw: %q", got)
	}
	c = newCLI(t, underReviewSession("plain plan\n"))
	if err := c.review(ctx, "demo", true, 0); err != nil {
		t.Fatal(err)
	}
	if got := c.out.String(); got != "plain plan\n" {
		t.Errorf("--raw of a plan ending in a newline: %q", got)
	}
}

func TestReviewState(t *testing.T) {
	as := underReviewSession("# P")
	r := underReview(as)
	as.Spec.Review = &v1alpha1.ReviewDecision{ReviewID: "r1", Decision: v1alpha1.ReviewDismiss}
	if got := reviewState(as, r); got != "Pending; decision Dismiss written, waiting for the manager" {
		t.Errorf("decided, not applied: %q", got)
	}
	decidedAt := metav1.NewTime(changed.Add(time.Minute))
	as.Status.Review = &v1alpha1.ReviewStatus{ID: "r1", Phase: v1alpha1.ReviewDismissed, DecidedAt: &decidedAt}
	if got := reviewState(as, r); got != "Dismissed at 2030-01-02T03:05:05Z" {
		t.Errorf("applied: %q", got)
	}
	// A decision on an older review does not count for this one.
	as.Spec.Review.ReviewID, as.Status.Review.ID = "r0", "r0"
	if got := reviewState(as, r); !strings.HasPrefix(got, "Pending, awaiting a decision") {
		t.Errorf("decision on an older review: %q", got)
	}
	if phase, ok := decided(as, r); ok {
		t.Errorf("decided(older review) = %q, true", phase)
	}
}

func TestNothingUnderReview(t *testing.T) {
	c := newCLI(t, session("demo"))
	want := `nothing under review: session "demo" has not presented a plan (status.agent.review is empty); the agent presents one with exit_plan_mode while in plan mode`
	if err := c.review(context.Background(), "demo", false, 0); err == nil || err.Error() != want {
		t.Errorf("review: %v", err)
	}
	if err := c.decide(context.Background(), "demo", v1alpha1.ReviewApprove, decideFlags{}); err == nil || err.Error() != want {
		t.Errorf("approve: %v", err)
	}
}

// Each decision writes spec.review for the plan it read and replies with what happens next;
// approving also sets spec.planMode.active to false in the same write.
func TestDecisionReplies(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		d        v1alpha1.ReviewDecisionType
		feedback string
		reply    string
		active   bool
	}{
		{v1alpha1.ReviewApprove, "", `Approved "Migrate" (review r1): the agent leaves plan mode at its next step.`, false},
		{v1alpha1.ReviewKeepPlanning, "mind the resume path", `Sent "Migrate" (review r1) back with your feedback: the agent keeps planning; the session stays in plan mode.`, true},
		{v1alpha1.ReviewKeepPlanning, "", `Sent "Migrate" (review r1) back: the agent keeps planning; the session stays in plan mode.`, true},
		{v1alpha1.ReviewDismiss, "ignored", `Dismissed the review of "Migrate" (review r1): the agent stops its turn; the session stays in plan mode until you run kubectl plan off demo.`, true},
	} {
		c := newCLI(t, underReviewSession("# Migrate\n"))
		if err := c.decide(ctx, "demo", tc.d, decideFlags{feedback: tc.feedback}); err != nil {
			t.Fatalf("%s: %v", tc.d, err)
		}
		if got := strings.TrimSpace(c.out.String()); got != tc.reply {
			t.Errorf("%s: reply %q, want %q", tc.d, got, tc.reply)
		}
		as := c.read(t)
		wantFeedback := ""
		if tc.d == v1alpha1.ReviewKeepPlanning {
			wantFeedback = tc.feedback // only keep-planning carries feedback
		}
		if r := as.Spec.Review; r == nil || r.ReviewID != "r1" || r.Decision != tc.d || r.Feedback != wantFeedback || r.PlanSHA256 != planmode.PlanSHA256("# Migrate\n") {
			t.Errorf("%s: spec.review %+v, want r1 %s feedback %q", tc.d, r, tc.d, wantFeedback)
		}
		if a := as.Spec.PlanMode.Active; a == nil || *a != tc.active {
			t.Errorf("%s: spec.planMode.active %v, want %v", tc.d, a, tc.active)
		}
	}
}

// A decision is refused, and nothing written, when it names another review or the plan was
// decided already.
func TestDecisionRefusals(t *testing.T) {
	ctx := context.Background()
	c := newCLI(t, underReviewSession("# Migrate\n"))
	err := c.decide(ctx, "demo", v1alpha1.ReviewApprove, decideFlags{reviewID: "r0"})
	if err == nil || err.Error() != `stale review id "r0": the plan under review is now "Migrate" (review r1); read it with: kubectl plan review demo` {
		t.Errorf("stale review id: %v", err)
	}
	if as := c.read(t); as.Spec.Review != nil {
		t.Errorf("a refused decision was written: %+v", as.Spec.Review)
	}

	as := underReviewSession("# Migrate\n")
	as.Status.Review = &v1alpha1.ReviewStatus{ID: "r1", Phase: v1alpha1.ReviewExpired}
	c = newCLI(t, as)
	err = c.decide(ctx, "demo", v1alpha1.ReviewDismiss, decideFlags{reviewID: "r1"})
	if err == nil || err.Error() != `nothing under review: the plan "Migrate" (review r1) was already decided: Expired` {
		t.Errorf("already decided: %v", err)
	}
}

// After writing, the plugin waits for the manager to close the review: closed as decided is
// success; closed otherwise, or withdrawn, fails; no answer within --wait is a warning.
func TestAwaitDecision(t *testing.T) {
	ctx := context.Background()
	closed := func(phase v1alpha1.ReviewPhase, msg string) *v1alpha1.AgentSession {
		as := underReviewSession("# Migrate\n")
		as.Status.Review = &v1alpha1.ReviewStatus{ID: "r1", Phase: phase, Message: msg}
		return as
	}
	c := newCLI(t, closed(v1alpha1.ReviewApproved, ""))
	c.wait = time.Second
	if err := c.awaitDecision(ctx, "demo", "r1", v1alpha1.ReviewApprove); err != nil {
		t.Errorf("closed as approved: %v", err)
	}
	c = newCLI(t, closed(v1alpha1.ReviewExpired, "no decision within 1h30m0s"))
	c.wait = time.Second
	if err := c.awaitDecision(ctx, "demo", "r1", v1alpha1.ReviewApprove); err == nil ||
		err.Error() != "review r1 closed as Expired before your decision applied: no decision within 1h30m0s" {
		t.Errorf("closed as expired: %v", err)
	}
	// The agent presented its next plan: it does so only once ours was answered.
	next := underReviewSession("# Next\n")
	next.Status.Agent.Review.ID = "r2"
	c = newCLI(t, next)
	c.wait = time.Second
	if err := c.awaitDecision(ctx, "demo", "r1", v1alpha1.ReviewKeepPlanning); err != nil {
		t.Errorf("next plan presented: %v", err)
	}
	withdrawn := session("demo")
	c = newCLI(t, withdrawn)
	c.wait = time.Second
	if err := c.awaitDecision(ctx, "demo", "r1", v1alpha1.ReviewDismiss); err == nil || !strings.Contains(err.Error(), "it withdrew the plan") {
		t.Errorf("withdrawn: %v", err)
	}
	c = newCLI(t, underReviewSession("# Migrate\n"))
	c.wait = 150 * time.Millisecond
	if err := c.awaitDecision(ctx, "demo", "r1", v1alpha1.ReviewDismiss); err != nil {
		t.Errorf("no answer: %v, want a warning only", err)
	}
	if !strings.Contains(c.errOut.String(), "warning: the manager has not acted on the decision within 150ms (check with: kubectl plan review demo)") {
		t.Errorf("no answer: stderr %q", c.errOut.String())
	}
}

// A decision names the digest of the text read: --plan-sha256 of another text is refused and
// nothing is written.
func TestDecisionBoundToPlanDigest(t *testing.T) {
	ctx := context.Background()
	const read, swapped = "# Migrate\n\n1. add columns\n", "# SWAPPED plan\n"
	c := newCLI(t, underReviewSession(swapped))
	err := c.decide(ctx, "demo", v1alpha1.ReviewApprove, decideFlags{planSHA256: planmode.PlanSHA256(read)})
	want := `the plan under review "SWAPPED plan" (review r1) is not the text you read: its SHA-256 is ` + planmode.PlanSHA256(swapped) +
		`, not ` + planmode.PlanSHA256(read) + `; nothing was decided. Read it again with: kubectl plan review demo`
	if err == nil || err.Error() != want {
		t.Fatalf("approve with the digest of another text: %v", err)
	}
	if as := c.read(t); as.Spec.Review != nil {
		t.Fatalf("a refused decision was written: %+v", as.Spec.Review)
	}
	c = newCLI(t, underReviewSession(read))
	if err := c.decide(ctx, "demo", v1alpha1.ReviewApprove, decideFlags{planSHA256: planmode.PlanSHA256(read)}); err != nil {
		t.Fatal(err)
	}
	if r := c.read(t).Spec.Review; r == nil || r.PlanSHA256 != planmode.PlanSHA256(read) {
		t.Fatalf("spec.review %+v, want the digest of the plan read", r)
	}
}

// With leaving plan mode selected during the review (kubectl plan off), dismiss and revise say
// the session leaves plan mode, not that it stays.
func TestDecisionRepliesWithLeavingSelected(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		d     v1alpha1.ReviewDecisionType
		reply string
	}{
		{v1alpha1.ReviewDismiss, `Dismissed the review of "Migrate" (review r1): the agent stops its turn; plan mode off is selected (kubectl plan off), ` +
			`so the session leaves plan mode at the agent's next step, in its next turn.`},
		{v1alpha1.ReviewKeepPlanning, `Sent "Migrate" (review r1) back: the agent revises it, but plan mode off is selected (kubectl plan off), ` +
			`so the session leaves plan mode at the agent's next step.`},
	} {
		as := underReviewSession("# Migrate\n")
		as.Spec.PlanMode.Active = bp(false)
		as.Status.PlanMode.Selection, as.Status.PlanMode.Pending = bp(false), true
		as.Status.PlanMode.PendingActive, as.Status.PlanMode.PendingSource = bp(false), v1alpha1.PendingSourceUser
		c := newCLI(t, as)
		if err := c.decide(ctx, "demo", tc.d, decideFlags{}); err != nil {
			t.Fatalf("%s: %v", tc.d, err)
		}
		if got := strings.TrimSpace(c.out.String()); got != tc.reply {
			t.Errorf("%s: reply %q, want %q", tc.d, got, tc.reply)
		}
	}
}
