package plancli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// kubectl plan list shows each session's plan mode, pending plan mode, selection and review in
// the vocabulary's columns, in the current namespace or, with -A, in all of them.
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
	if err := c.list(context.Background(), listFlags{}); err != nil {
		t.Fatal(err)
	}
	// The columns of kubectl get agentsessions, with their values: the fields as they are.
	wantLines(t, c.out.String(),
		"NAME PLAN-MODE PENDING SELECTED REVIEW READY AGE",
		"awaiting true Pending True 3h",
		"idle false 3h",
		"leaving true false KeepPlanning 3h",
	)
	if strings.Contains(c.out.String(), "elsewhere") {
		t.Errorf("list without -A shows another namespace:\n%s", c.out.String())
	}
	c.out.Reset()
	if err := c.list(context.Background(), listFlags{all: true}); err != nil {
		t.Fatal(err)
	}
	wantLines(t, c.out.String(),
		"NAMESPACE NAME PLAN-MODE PENDING SELECTED REVIEW READY AGE",
		"team-a awaiting true Pending True 3h",
		"team-b elsewhere false 3h",
	)

	// -o json and -o yaml: the same facts, in the same words.
	c.out.Reset()
	if err := c.list(context.Background(), listFlags{output: "json"}); err != nil {
		t.Fatal(err)
	}
	var doc struct{ Items []SessionRow }
	if err := json.Unmarshal(c.out.Bytes(), &doc); err != nil {
		t.Fatalf("list -o json: %v\n%s", err, c.out.String())
	}
	if len(doc.Items) != 3 || doc.Items[2].Name != "leaving" || !doc.Items[2].PlanMode || doc.Items[2].Pending == nil || *doc.Items[2].Pending ||
		doc.Items[2].Review != v1alpha1.ReviewKeptPlanning {
		t.Errorf("list -o json: %+v", doc.Items)
	}
	c.out.Reset()
	if err := c.list(context.Background(), listFlags{output: "yaml"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.out.String(), "review: KeepPlanning") || !strings.Contains(c.out.String(), "planMode: true") {
		t.Errorf("list -o yaml:\n%s", c.out.String())
	}
	if err := c.list(context.Background(), listFlags{output: "wide"}); err == nil || !strings.Contains(err.Error(), `unknown output format "wide" for -o`) {
		t.Errorf("list -o wide: %v", err)
	}
	if err := c.list(context.Background(), listFlags{output: "json", watch: true}); err == nil || !strings.Contains(err.Error(), "-w prints table lines") {
		t.Errorf("list -w -o json: %v", err)
	}

	empty := newCLI(t)
	if err := empty.list(context.Background(), listFlags{}); err != nil {
		t.Fatal(err)
	}
	if got := empty.errOut.String(); got != "No AgentSessions found in namespace team-a.\n" {
		t.Errorf("empty namespace: %q", got)
	}
}
