package controllers

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

// appendFailureSpecs: a log store that fails the plan/mode append (phase_log.go).
func appendFailureSpecs(fx *specFixture) {
	Describe("append failure", func() {
		BeforeEach(fx.start)

		It("answers the boundary Failed, keeps the selection pending, and commits it at a later boundary once the store is back", func() {
			a := pendingInTurn(fx.ns, "fail", fx.be().agentStore)

			fx.mgr.store.failPlanMode.Store(true)
			r := a.boundary(1, 2)
			Expect(r.failed).To(BeTrue())
			Expect(r.ack.Message).To(ContainSubstring("injected fault"))
			as := a.awaitStatus(false, true)
			Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonLogStoreError))
			Eventually(func() []string { return eventReasons(a.key) }, timeout, interval).Should(ContainElement("Warning/" + agentsv1alpha1.ReasonLogStoreError))
			Expect(a.planModes()).To(BeEmpty())

			// A v2 agent goes on under the committed state; its turn ends. The selection was
			// queued in the turn: it waits for a later turn's boundary, also once the store is back.
			a.endTurn("completed")
			fx.mgr.store.failPlanMode.Store(false)
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero())
			Expect(a.get().Status.PlanMode.Pending).To(BeTrue())

			a.startTurn(2)
			r = a.boundary(2, 1)
			Expect(r.committed).To(BeTrue())
			Expect(r.notice).To(Equal(harness.NoticePlanOn), "the earlier header told default mode")
			as = a.awaitStatus(true, false)
			Expect(readyReason(as)).To(Equal("True/InSync"))
			Expect(a.planModes()).To(HaveLen(1))
		})

		It("keeps a between-turns selection pending while the store fails, and reports it", func() {
			a := newSession(fx.ns, "failidle", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			fx.mgr.store.failPlanMode.Store(true)
			setActive(a.key, T)
			Eventually(func(g Gomega) {
				as := a.get()
				g.Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonLogStoreError))
				g.Expect(as.Status.PlanMode.Pending).To(BeTrue())
				g.Expect(as.Status.PlanMode.PendingActive).To(Equal(T))
			}, timeout, interval).Should(Succeed())
			Expect(a.planModes()).To(BeEmpty())

			fx.mgr.store.failTail.Store(true) // the whole store is unreachable now
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero())
			fx.mgr.store.failTail.Store(false)
			fx.mgr.store.failPlanMode.Store(false)
			a.awaitStatus(true, false)
			Expect(a.planModes()).To(HaveLen(1))
		})
	})
}

var _ = Describe("AgentSession reconciler when the PostgreSQL server stops", func() {
	It("fails the waiting proposal, keeps the selection pending and says why", func() {
		srv, err := pgtest.Start(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(srv.Stop)
		url, err := srv.CreateDatabase(suiteCtx, "stopping")
		Expect(err).NotTo(HaveOccurred())
		mgrStore, err := sessionlog.Open(suiteCtx, url)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(mgrStore.Close)
		agentStore, err := sessionlog.Open(suiteCtx, url)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(agentStore.Close)

		ns := newNamespace(true)
		startManager(ns, mgrStore, managerOptions{})
		a := pendingInTurn(ns, "pgstop", agentStore)
		seq := a.tail().NextSeq

		Expect(srv.Stop()).To(Succeed()) // the real server goes away
		a.report(1, 2, seq)
		ack := a.awaitAck(1, 2, seq)
		Expect(ack.Result).To(Equal(agentsv1alpha1.BoundaryFailed))
		Expect(ack.Message).To(ContainSubstring("log store"))
		Expect(ack.Message).To(ContainSubstring("stays pending"))
		Eventually(func(g Gomega) {
			as := a.get()
			g.Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonLogStoreError))
			g.Expect(as.Status.PlanMode.Pending).To(BeTrue())
			g.Expect(as.Status.PlanMode.Active).To(BeFalse())
		}, timeout, interval).Should(Succeed())
		Eventually(func() []string { return eventReasons(a.key) }, timeout, interval).Should(ContainElement("Warning/" + agentsv1alpha1.ReasonLogStoreError))
	})
})
