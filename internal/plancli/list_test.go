package plancli

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// kubectl plan list shows each session's committed state, pending selection and review, in
// the current namespace or, with -A, in all of them.
func TestList(t *testing.T) {
	created := metav1.NewTime(time.Now().Add(-3 * time.Hour))
	idle := session("idle")
	idle.CreationTimestamp = created

	awaiting := session("awaiting")
	awaiting.CreationTimestamp = created
	awaiting.Status.PlanMode.Active = true
	awaiting.Status.Agent = &v1alpha1.AgentReport{Review: &v1alpha1.PlanReviewRequest{ID: "r1", Plan: "# Plan"}}
	awaiting.Status.Review = &v1alpha1.ReviewStatus{ID: "r1", Phase: v1alpha1.ReviewPending}
	awaiting.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Committed", LastTransitionTime: created}}

	leaving := session("leaving")
	leaving.CreationTimestamp = created
	leaving.Status.PlanMode.Active = true
	leaving.Status.PlanMode.Pending = true
	leaving.Status.PlanMode.PendingActive = ptr.To(false)
	leaving.Status.Agent = &v1alpha1.AgentReport{Review: &v1alpha1.PlanReviewRequest{ID: "r2"}}
	leaving.Status.Review = &v1alpha1.ReviewStatus{ID: "r2", Phase: v1alpha1.ReviewKeptPlanning}

	elsewhere := session("elsewhere")
	elsewhere.Namespace = "team-b"
	elsewhere.CreationTimestamp = created

	c := newCLI(t, idle, awaiting, leaving, elsewhere)
	if err := c.list(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	wantLines(t, c.out.String(),
		"NAME PLAN PENDING REVIEW READY AGE",
		"awaiting plan - awaiting True 3h",
		"idle default - - Unknown 3h",
		"leaving plan leaving revised Unknown 3h",
	)
	if strings.Contains(c.out.String(), "elsewhere") {
		t.Errorf("list without -A shows another namespace:\n%s", c.out.String())
	}
	c.out.Reset()
	if err := c.list(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	wantLines(t, c.out.String(),
		"NAMESPACE NAME PLAN PENDING REVIEW READY AGE",
		"team-a awaiting plan - awaiting True 3h",
		"team-b elsewhere default - - Unknown 3h",
	)

	// A decision written but not yet taken up by the manager.
	awaiting.Spec.Review = &v1alpha1.ReviewDecision{ReviewID: "r1", Decision: v1alpha1.ReviewApprove}
	if got := reviewShort(awaiting); got != "decided" {
		t.Errorf("decided review: %q", got)
	}

	empty := newCLI(t)
	if err := empty.list(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if got := empty.errOut.String(); got != "No AgentSessions found in namespace team-a.\n" {
		t.Errorf("empty namespace: %q", got)
	}
}
