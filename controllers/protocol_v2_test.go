package controllers

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// Protocol v2 (docs/protocol.md): an agent never waits on the manager, a report the log has
// moved past is dismissed, a selection queued in a turn waits for a step boundary of a later
// turn, a missing config stalls only plan mode, and a fork may be seeded by either side.
var _ = Describe("AgentSession reconciler, protocol v2", func() {
	var ns string
	T, F := ptr.To(true), ptr.To(false)
	be := func() *backend { return backends["sqlite"] }

	stalled := func(as *agentsv1alpha1.AgentSession) bool {
		return meta.IsStatusConditionTrue(as.Status.Conditions, agentsv1alpha1.ConditionStalled)
	}

	It("dismisses a report the log moved past while the manager was down: not Failed, not Stalled; the selection applies at a later boundary", func() {
		ns = newNamespace(true)
		mgr := startManager(ns, be().mgrStore, managerOptions{})
		a := pendingInTurn(ns, "outage", be().agentStore)

		mgr.stop()
		// The agent reports step 2's boundary, gets no answer within its bound, and goes on
		// under the committed state; its turn then ends.
		seq := a.tail().NextSeq
		a.report(1, 2, seq)
		a.append(harness.MustEvent(harness.TypeStepStart, harness.StepStart{Turn: 1, Step: 2}))
		a.endStep(1, 2)
		a.endTurn("completed")

		startManager(ns, be().mgrStore, managerOptions{})
		ack := a.awaitAck(1, 2, seq)
		Expect(ack.Result).To(Equal(agentsv1alpha1.BoundaryDismissed))
		Expect(ack.Reason).To(Equal(agentsv1alpha1.ReasonSuperseded))
		Eventually(func(g Gomega) {
			as := a.get()
			g.Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonSelectionPending))
			g.Expect(meta.IsStatusConditionTrue(as.Status.Conditions, agentsv1alpha1.ConditionReconciling)).To(BeTrue())
			g.Expect(stalled(as)).To(BeFalse())
			g.Expect(as.Status.PlanMode.QueuedInTurn).To(BeEquivalentTo(1))
		}, timeout, interval).Should(Succeed())
		Expect(eventReasons(a.key)).NotTo(ContainElement("Warning/" + agentsv1alpha1.ReasonInvalidBoundary))
		Expect(a.planModes()).To(BeEmpty(), "queued in turn 1: nothing is appended when the turn ends")

		// The next turn's first boundary applies it.
		a.append(harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: 2}))
		r := a.boundary(2, 1)
		Expect(r.asked).To(BeTrue())
		Expect(r.committed).To(BeTrue())
		as := a.awaitStatus(true, false)
		Expect(readyReason(as)).To(Equal("True/InSync"))
		Expect(stalled(as)).To(BeFalse())
		Expect(activeValues(a.planModes())).To(Equal([]bool{true}))
	})

	It("keeps a selection made after a turn's final boundary pending past turn/end, and logs nothing when it is cancelled before a later boundary", func() {
		ns = newNamespace(true)
		startManager(ns, be().mgrStore, managerOptions{})
		a := newSession(ns, "turnend", nil, nil, be().agentStore)
		a.awaitStatus(false, false)
		a.startTurn(1)
		a.boundary(1, 1)
		setActive(a.key, T) // after the turn's final step boundary
		a.awaitStatus(false, true)
		a.endStep(1, 1)
		a.endTurn("aborted") // however the turn ends
		Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero(), "no commit after turn/end")
		Expect(a.get().Status.PlanMode.Pending).To(BeTrue())

		setActive(a.key, F) // cancelled between turns
		as := a.awaitStatus(false, false)
		Expect(as.Status.PlanMode.PendingActive).To(BeNil())
		Expect(readyReason(as)).To(Equal("True/InSync"))

		a.append(harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: 2}))
		r := a.boundary(2, 1)
		Expect(r.asked).To(BeFalse(), "nothing pending any more")
		Expect(r.committed).To(BeFalse())
		Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero(), "cancelled: nothing is ever logged")
	})

	It("stalls nothing for a missing PlanModeConfig unless plan mode is involved, and then warns", func() {
		ns = newNamespace(false)
		startManager(ns, be().mgrStore, managerOptions{})
		a := newSession(ns, "nocfg", nil, nil, be().agentStore)
		Eventually(func(g Gomega) {
			as := a.get()
			g.Expect(as.Status.ObservedGeneration).To(Equal(as.Generation))
			g.Expect(readyReason(as)).To(Equal("True/InSync"))
			g.Expect(stalled(as)).To(BeFalse())
			g.Expect(as.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("PlanModeConfig"))), "Ready names the missing config")
		}, timeout, interval).Should(Succeed())
		Expect(eventReasons(a.key)).NotTo(ContainElement("Warning/"+agentsv1alpha1.ReasonConfigMissing), "nothing waits for it yet")
		// Steps run, with nothing to ask.
		a.startTurn(1)
		Expect(a.boundary(1, 1).asked).To(BeFalse())
		a.endStep(1, 1)
		a.endTurn("completed")

		// Entering plan mode is held: a human must create the config.
		setActive(a.key, T)
		Eventually(func(g Gomega) {
			as := a.get()
			g.Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonConfigMissing))
			g.Expect(stalled(as)).To(BeTrue())
		}, timeout, interval).Should(Succeed())
		Eventually(func() []string { return eventReasons(a.key) }, timeout, interval).Should(ContainElement("Warning/" + agentsv1alpha1.ReasonConfigMissing))
		Expect(a.planModes()).To(BeEmpty())
		createConfig(ns, agentsv1alpha1.DefaultPlanModeConfigName)
		Expect(readyReason(a.awaitStatus(true, false))).To(Equal("True/InSync"))
	})

	It("takes a fork the agent seeded before the manager's first reconcile", func() {
		ns = newNamespace(true)
		parent := newSession(ns, "parent", nil, nil, be().agentStore)
		parent.startTurn(1)
		parent.append(harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: true}))
		parent.endTurn("completed")
		// No manager yet: the agent (pkg/agentsdk does this at start) seeds the fork and starts a turn.
		child := newSession(ns, "child", nil, &agentsv1alpha1.ForkSource{SessionID: parent.sid}, be().agentStore)
		// The parent's agent claimed its log at its start; the child's agent forks it for the child.
		parentAS, childAS := parent.get(), child.get()
		_, err := be().agentStore.ClaimOwner(suiteCtx, parent.sid, sessionlog.Owner{Namespace: ns, Name: "parent", UID: string(parentAS.UID)})
		Expect(err).NotTo(HaveOccurred())
		_, err = be().agentStore.Fork(suiteCtx, parent.sid, child.sid, -1, sessionlog.Owner{Namespace: ns, Name: "child", UID: string(childAS.UID)})
		Expect(err).NotTo(HaveOccurred())
		child.append(harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: 2}))

		startManager(ns, be().mgrStore, managerOptions{})
		as := child.awaitStatus(true, false)
		Expect(readyReason(as)).To(Equal("True/InSync"))
		Expect(child.planModes()).To(HaveLen(1), "the inherited plan/mode only")
		Expect(child.boundary(2, 1).committed).To(BeTrue())
	})

	It("refuses a fork whose log was written without its parent with a terminal condition naming the fix, and still answers boundaries", func() {
		ns = newNamespace(true)
		parent := newSession(ns, "parent", nil, nil, be().agentStore)
		parent.startTurn(1)
		parent.endTurn("completed")
		child := newSession(ns, "child", nil, &agentsv1alpha1.ForkSource{SessionID: parent.sid}, be().agentStore)
		child.startTurn(1) // an agent without fork support appended first: the log exists without its parent

		startManager(ns, be().mgrStore, managerOptions{})
		Eventually(func(g Gomega) {
			as := child.get()
			g.Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonForkRefused))
			g.Expect(stalled(as)).To(BeTrue())
			c := meta.FindStatusCondition(as.Status.Conditions, agentsv1alpha1.ConditionReady)
			g.Expect(c.Message).To(ContainSubstring("new spec.sessionID"))
		}, timeout, interval).Should(Succeed())
		Eventually(func() []string { return eventReasons(child.key) }, timeout, interval).Should(ContainElement("Warning/" + agentsv1alpha1.ReasonForkRefused))

		setActive(child.key, T)
		r := child.boundary(1, 1)
		Expect(r.asked).To(BeTrue())
		Expect(r.ack.Result).To(Equal(agentsv1alpha1.BoundaryAdmitted))
		Expect(r.committed).To(BeTrue())
	})

	It("refuses a fork whose throughSeq ends inside an open turn of the parent with a terminal condition naming the fix", func() {
		ns = newNamespace(true)
		parent := newSession(ns, "parent", nil, nil, be().agentStore)
		parent.startTurn(1) // seq 0, open
		through := int64(0)
		child := newSession(ns, "child", nil, &agentsv1alpha1.ForkSource{SessionID: parent.sid, ThroughSeq: &through}, be().agentStore)
		startManager(ns, be().mgrStore, managerOptions{})
		Eventually(func(g Gomega) {
			as := child.get()
			g.Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonForkRefused))
			g.Expect(stalled(as)).To(BeTrue())
			c := meta.FindStatusCondition(as.Status.Conditions, agentsv1alpha1.ConditionReady)
			g.Expect(c.Message).To(ContainSubstring("spec.fork.throughSeq 0 ends inside open turn 1"))
		}, timeout, interval).Should(Succeed())
	})
})
