package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// The review gauges: how many plans wait, and for how long the oldest of each namespace has
// waited, by the manager's clock.
func TestReviewGauges(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	session := func(ns, name string, phase agentsv1alpha1.ReviewPhase, openedAgo time.Duration) *agentsv1alpha1.AgentSession {
		at := metav1.NewTime(now.Add(-openedAgo))
		return &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Status: agentsv1alpha1.AgentSessionStatus{Review: &agentsv1alpha1.ReviewStatus{ID: "r1", Phase: phase, OpenedAt: &at}}}
	}
	sch := runtime.NewScheme()
	if err := agentsv1alpha1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(sch).WithObjects(
		session("team-a", "a1", agentsv1alpha1.ReviewPending, 10*time.Minute),
		session("team-a", "a2", agentsv1alpha1.ReviewPending, time.Hour),
		session("team-b", "b1", agentsv1alpha1.ReviewPending, 90*time.Second),
		session("team-b", "b2", agentsv1alpha1.ReviewApproved, 2*time.Hour),
	).Build()
	col := NewSessionCollector(c)
	col.now = func() time.Time { return now }
	want := `
# HELP planmode_review_pending_oldest_seconds Age of the oldest plan review waiting for a decision in each namespace that has one, by the manager's clock (status.review.openedAt).
# TYPE planmode_review_pending_oldest_seconds gauge
planmode_review_pending_oldest_seconds{namespace="team-a"} 3600
planmode_review_pending_oldest_seconds{namespace="team-b"} 90
# HELP planmode_reviews_pending Plan reviews waiting for a decision (status.review.phase Pending).
# TYPE planmode_reviews_pending gauge
planmode_reviews_pending 3
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "planmode_reviews_pending", "planmode_review_pending_oldest_seconds"); err != nil {
		t.Fatal(err)
	}
}
