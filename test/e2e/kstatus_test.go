package e2e

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

// kstatus is what Flux (and Argo CD with the health check in config/samples/gitops) reads: the
// AgentSession conditions the real manager writes must compute to the truth in every state.
var _ = Describe("kstatus health of AgentSessions written by the real manager", Ordered, func() {
	const ns, name = "e2e-kstatus", "health"
	var (
		srv   *pgtest.Server
		mgr   *manager
		store sessionlog.Store
		sid   = "e2e-kstatus-health"
	)

	BeforeAll(func() {
		// Its own PostgreSQL server: this container stops it.
		srv = pgtest.MustStart(GinkgoT())
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(k8s.Create(ctx, &agentsv1alpha1.PlanModeConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agentsv1alpha1.DefaultPlanModeConfigName},
			Spec:       agentsv1alpha1.PlanModeConfigSpec{Section: "Plan first."},
		})).To(Succeed())
		mgr = startManager("manager-kstatus", srv.URL, true)
		var err error
		store, err = sessionlog.Open(ctx, srv.URL)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(store.Close)
	})

	compute := func() *status.Result {
		GinkgoHelper()
		var s agentsv1alpha1.AgentSession
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
		obj, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(&s)
		Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion(agentsv1alpha1.GroupVersion.String())
		u.SetKind("AgentSession")
		res, err := status.Compute(u)
		Expect(err).NotTo(HaveOccurred())
		return res
	}
	patchSpec := func(active bool) {
		GinkgoHelper()
		var s agentsv1alpha1.AgentSession
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
		p := client.MergeFrom(s.DeepCopy())
		s.Spec.PlanMode.Active = &active
		Expect(k8s.Patch(ctx, &s, p)).To(Succeed())
	}

	It("is Current when the committed state is in sync with the selection", func() {
		Expect(k8s.Create(ctx, &agentsv1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: sid},
		})).To(Succeed())
		Eventually(compute).WithTimeout(settle).WithPolling(poll).Should(And(
			HaveField("Status", status.CurrentStatus), HaveField("Message", "Resource is Ready")))
	})

	It("is InProgress, saying why, while a selection waits for a step boundary", func() {
		// A turn is open in the log (the agent is mid-turn), so the selection must wait.
		data, _ := json.Marshal(map[string]int64{"turn": 1})
		_, err := store.Append(ctx, sid, []harness.Event{{Type: "turn/start", Seq: 0, Time: time.Now().UnixMilli(), Data: data}})
		Expect(err).NotTo(HaveOccurred())
		patchSpec(true)
		Eventually(compute).WithTimeout(settle).WithPolling(poll).Should(And(
			HaveField("Status", status.InProgressStatus),
			HaveField("Message", "plan mode on is selected and waits for the agent's next step boundary")))
	})

	It("is Failed with the store's message while the log store is down", func() {
		Expect(srv.Stop()).To(Succeed())
		// The agent reports its next step boundary: the manager must read the log to answer it.
		var s agentsv1alpha1.AgentSession
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
		p := client.MergeFrom(s.DeepCopy())
		s.Status.Agent = &agentsv1alpha1.AgentReport{Boundary: &agentsv1alpha1.StepBoundary{Turn: 1, Step: 1, Seq: 1}}
		Expect(k8s.Status().Patch(ctx, &s, p)).To(Succeed())
		Eventually(compute).WithTimeout(settle).WithPolling(poll).Should(And(
			HaveField("Status", status.FailedStatus),
			HaveField("Message", ContainSubstring("read the log tail of session \"e2e-kstatus-health\"")),
			HaveField("Conditions", ContainElement(And(
				HaveField("Type", status.ConditionStalled), HaveField("Reason", agentsv1alpha1.ReasonLogStoreError))))))
		// Readiness does not: it routes admission, which needs no store (docs/operations.md).
		Consistently(func() (int, error) { return httpStatus(mgr.readyURL) }).WithTimeout(3 * time.Second).WithPolling(poll).
			Should(Equal(200))
	})

	It("is InProgress while a new generation waits for the log store, the failure on Stalled", func() {
		patchSpec(false) // a new generation: it is observed only once the log can be read
		Eventually(func(g Gomega) {
			var s agentsv1alpha1.AgentSession
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
			g.Expect(s.Status.Conditions).To(ContainElement(And(
				HaveField("Type", agentsv1alpha1.ConditionStalled), HaveField("Reason", agentsv1alpha1.ReasonLogStoreError),
				HaveField("ObservedGeneration", s.Generation))), "the failure is reported for the generation it blocks")
			g.Expect(s.Status.ObservedGeneration).To(BeNumerically("<", s.Generation), "a generation that failed is not observed")
		}).WithTimeout(settle).WithPolling(poll).Should(Succeed())
		res := compute()
		Expect(res.Status).To(Equal(status.InProgressStatus))
		Expect(res.Message).To(MatchRegexp(`AgentSession generation is \d+, but latest observed generation is \d+`))
	})

	It("is InProgress while the manager has not observed the latest generation", func() {
		mgr.kill()
		patchSpec(true)
		res := compute()
		Expect(res.Status).To(Equal(status.InProgressStatus))
		Expect(res.Message).To(MatchRegexp(`AgentSession generation is \d+, but latest observed generation is \d+`))
	})
})
