package controllers

import (
	"database/sql"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

var _ = Describe("a log store that is not the session's", func() {
	It("stops an emptied or replaced store with LogStoreMismatch, appends nothing there, and carries on once adopted", func() {
		b := openBackend("sqlite")
		ns := newNamespace(true)
		var storeID atomic.Pointer[string]
		id := func(s string) { storeID.Store(&s) }
		id("store-a")
		startManager(ns, b.mgrStore, managerOptions{storeID: func() string { return *storeID.Load() }})
		a := newSession(ns, "s", ptr.To(true), nil, b.agentStore)
		poke := func(v string) {
			GinkgoHelper()
			// A merge patch: the manager's status writes move resourceVersion meanwhile.
			s := a.get()
			base := client.MergeFrom(s.DeepCopy())
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations["test.harness.dev/poke"] = v
			Expect(k8sClient.Patch(suiteCtx, s, base)).To(Succeed())
		}
		ready := func(g Gomega) *agentsv1alpha1.AgentSession {
			s := a.get()
			c := meta.FindStatusCondition(s.Status.Conditions, agentsv1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			return s
		}
		reason := func(g Gomega) string {
			return meta.FindStatusCondition(ready(g).Status.Conditions, agentsv1alpha1.ConditionReady).Reason
		}

		By("recording the store's identity with the position")
		Eventually(func(g Gomega) {
			s := ready(g)
			g.Expect(s.Status.PlanMode.Active).To(BeTrue())
			g.Expect(s.Status.PlanMode.NextSeq).To(Equal(int64(1)))
			g.Expect(s.Status.PlanMode.StoreID).To(Equal("store-a"))
		}, timeout, interval).Should(Succeed())

		By("emptying the store: the log ends before the recorded position")
		db, err := sql.Open("sqlite", strings.TrimPrefix(b.url, "sqlite://"))
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = db.Close() }()
		_, err = db.ExecContext(suiteCtx, `DELETE FROM events; DELETE FROM sessions`)
		Expect(err).NotTo(HaveOccurred())
		setActive := func(v bool) {
			GinkgoHelper()
			s := a.get()
			base := client.MergeFrom(s.DeepCopy())
			s.Spec.PlanMode.Active = ptr.To(v)
			Expect(k8sClient.Patch(suiteCtx, s, base)).To(Succeed())
		}
		setActive(false) // a selection makes the manager read the log
		Eventually(reason, timeout, interval).Should(Equal(agentsv1alpha1.ReasonLogStoreMismatch))
		s := a.get()
		stalled := meta.FindStatusCondition(s.Status.Conditions, agentsv1alpha1.ConditionStalled)
		Expect(stalled).NotTo(BeNil())
		Expect(stalled.Message).To(ContainSubstring("ends at seq 0 in the log store, before seq 1"))
		Expect(stalled.Message).To(ContainSubstring(agentsv1alpha1.AnnotationAdoptLogStore + "=store-a:0"))
		Expect(s.Status.PlanMode.NextSeq).To(Equal(int64(1)), "the recorded position is kept")
		Consistently(func() int64 { return a.tail().NextSeq }, quiet, interval).Should(BeZero(), "the manager appended to the emptied log")

		By("adopting the emptied store: the selection in spec is committed there again")
		s = a.get()
		base := client.MergeFrom(s.DeepCopy())
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[agentsv1alpha1.AnnotationAdoptLogStore] = agentsv1alpha1.AdoptLogStoreValue("store-a", 0)
		Expect(k8sClient.Patch(suiteCtx, s, base)).To(Succeed())
		Eventually(reason, timeout, interval).Should(Equal(agentsv1alpha1.ReasonInSync))
		Expect(a.planModes()).To(BeEmpty())
		setActive(true)
		Eventually(func() []harness.Event { return a.planModes() }, timeout, interval).Should(HaveLen(1))
		Eventually(reason, timeout, interval).Should(Equal(agentsv1alpha1.ReasonInSync))
		Expect(a.tail().Active).To(BeTrue())

		By("a store with another identity")
		id("store-b")
		poke("1")
		Eventually(reason, timeout, interval).Should(Equal(agentsv1alpha1.ReasonLogStoreMismatch))
		c := meta.FindStatusCondition(a.get().Status.Conditions, agentsv1alpha1.ConditionReady)
		Expect(c.Message).To(ContainSubstring("identity store-b, but this session's status was recorded against store store-a"))
		Expect(a.get().Status.PlanMode.StoreID).To(Equal("store-a"))

		By("a boundary reported meanwhile is answered Failed, never admitted")
		a.startTurn(1)
		a.report(1, 1, a.tail().NextSeq)
		ack := a.awaitAck(1, 1, 2)
		Expect(ack.Result).To(Equal(agentsv1alpha1.BoundaryFailed))
		Expect(ack.Reason).To(Equal(agentsv1alpha1.ReasonLogStoreMismatch))
		Expect(a.planModes()).To(HaveLen(1))
	})
})
