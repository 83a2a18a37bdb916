package metrics

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// The session gauges follow the sessions a real cache holds, through their creation, status
// changes and deletion: counted from the informer's events, not by walking the cache.
func TestSessionGauges(t *testing.T) {
	g := NewWithT(t)
	env, cfg, err := framework.Start(framework.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	sch := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(sch)).To(Succeed())
	g.Expect(agentsv1alpha1.AddToScheme(sch)).To(Succeed())
	c, err := client.New(cfg, client.Options{Scheme: sch})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	now := time.Now().Truncate(time.Second)
	type want struct {
		phase     agentsv1alpha1.ReviewPhase
		openedAgo time.Duration
		active    bool
		pending   bool
		ready     metav1.ConditionStatus
		reason    string
	}
	sessions := map[string]want{
		"team-a/a1": {phase: agentsv1alpha1.ReviewPending, openedAgo: 10 * time.Minute, active: true, ready: metav1.ConditionTrue, reason: "InSync"},
		"team-a/a2": {phase: agentsv1alpha1.ReviewPending, openedAgo: time.Hour, active: true, ready: metav1.ConditionTrue, reason: "InSync"},
		"team-b/b1": {phase: agentsv1alpha1.ReviewPending, openedAgo: 90 * time.Second, pending: true, ready: metav1.ConditionFalse, reason: "SelectionPending"},
		"team-b/b2": {phase: agentsv1alpha1.ReviewApproved, openedAgo: 2 * time.Hour, active: true, ready: metav1.ConditionTrue, reason: "InSync"},
		"team-b/b3": {}, // never reconciled: no status
	}
	for _, ns := range []string{"team-a", "team-b"} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	setStatus := func(s *agentsv1alpha1.AgentSession, w want) {
		at := metav1.NewTime(now.Add(-w.openedAgo))
		s.Status.PlanMode.Active, s.Status.PlanMode.Pending = w.active, w.pending
		s.Status.Review = &agentsv1alpha1.ReviewStatus{ID: "r1", Phase: w.phase, OpenedAt: &at}
		s.Status.Conditions = []metav1.Condition{{Type: agentsv1alpha1.ConditionReady, Status: w.ready, Reason: w.reason, Message: "m", LastTransitionTime: at}}
		g.Expect(c.Status().Update(ctx, s)).To(Succeed())
	}
	for key, w := range sessions {
		ns, name, _ := strings.Cut(key, "/")
		s := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: agentsv1alpha1.AgentSessionSpec{SessionID: ns + "-" + name}}
		g.Expect(c.Create(ctx, s)).To(Succeed())
		if w.phase != "" {
			setStatus(s, w)
		}
	}

	// The gauges on a watch of a real cache, as the reconciler's controller watches with them.
	informers, err := cache.New(cfg, cache.Options{Scheme: sch})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = informers.Start(ctx) }()
	col := NewSessionCollector()
	col.now = func() time.Time { return now }
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(queue.ShutDown)
	watch := source.Kind[client.Object](informers, &agentsv1alpha1.AgentSession{}, col.EventHandler())
	g.Expect(watch.Start(ctx, queue)).To(Succeed())
	g.Expect(watch.WaitForSync(ctx)).To(Succeed())

	expect := func(text, why string) {
		t.Helper()
		g.Eventually(func() error { return testutil.CollectAndCompare(col, strings.NewReader(text)) }).
			WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(Succeed(), why)
	}
	const help = `
# HELP planmode_review_pending_oldest_seconds Age of the oldest plan review waiting for a decision in each namespace that has one, by the manager's clock (status.review.openedAt).
# TYPE planmode_review_pending_oldest_seconds gauge
%s# HELP planmode_reviews_pending Plan reviews waiting for a decision (status.review.phase Pending).
# TYPE planmode_reviews_pending gauge
planmode_reviews_pending %d
# HELP planmode_sessions AgentSessions by committed plan-mode state (status.planMode.active).
# TYPE planmode_sessions gauge
planmode_sessions{active="false"} %d
planmode_sessions{active="true"} %d
# HELP planmode_sessions_pending AgentSessions whose selection waits for a step boundary (status.planMode.pending).
# TYPE planmode_sessions_pending gauge
planmode_sessions_pending %d
# HELP planmode_sessions_ready AgentSessions by Ready condition status and reason (InSync, SelectionPending, LogStoreUnavailable, ConfigMissing, InvalidBoundaryReport; none: not reconciled yet).
# TYPE planmode_sessions_ready gauge
%s`
	expect(fmt.Sprintf(help,
		`planmode_review_pending_oldest_seconds{namespace="team-a"} 3600
planmode_review_pending_oldest_seconds{namespace="team-b"} 90
`, 3,
		2, 3, 1,
		`planmode_sessions_ready{reason="InSync",status="True"} 3
planmode_sessions_ready{reason="SelectionPending",status="False"} 1
planmode_sessions_ready{reason="none",status="Unknown"} 1
`),
		"the sessions as listed")

	// b1's review is approved and its selection committed; a2 is deleted; b3 is reconciled.
	var b1, a2, b3 agentsv1alpha1.AgentSession
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "b1"}, &b1)).To(Succeed())
	setStatus(&b1, want{phase: agentsv1alpha1.ReviewApproved, openedAgo: 90 * time.Second, active: true, ready: metav1.ConditionTrue, reason: "InSync"})
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "a2"}, &a2)).To(Succeed())
	g.Expect(c.Delete(ctx, &a2)).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "b3"}, &b3)).To(Succeed())
	b3.Status.Conditions = []metav1.Condition{{Type: agentsv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "InSync", Message: "m", LastTransitionTime: metav1.NewTime(now)}}
	g.Expect(c.Status().Update(ctx, &b3)).To(Succeed())
	expect(fmt.Sprintf(help,
		"planmode_review_pending_oldest_seconds{namespace=\"team-a\"} 600\n", 1,
		1, 3, 0,
		"planmode_sessions_ready{reason=\"InSync\",status=\"True\"} 4\n"),
		"the gauges follow each change: team-b has no review waiting, team-a's oldest is a1's")
	g.Expect(queue.Len()).To(BeZero(), "the gauges' handler queues nothing")
}
