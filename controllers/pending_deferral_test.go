package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// heldPendingSpecs: the pending write of a selection made during a turn is held for the
// agent's report (pending_deferral.go).
func heldPendingSpecs(fx *specFixture) {
	Describe("a selection made during a turn, its pending write held for the agent's report", func() {
		const hold = 3 * time.Second
		BeforeEach(func() {
			fx.ns = newNamespace(true)
			fx.mgr = startManager(fx.ns, fx.be().mgrStore, managerOptions{pendingStatusDelay: hold})
		})

		inTurn := func(name string) *agent {
			a := newSession(fx.ns, name, nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			a.startTurn(1)
			a.boundary(1, 1)
			a.endStep(1, 1)
			return a
		}

		It("costs the report and one answer carrying the commit when the report comes first", func() {
			a := inTurn("held")
			before := stableWrites(&fx.mgr.statusWrites)
			setActive(a.key, T)
			// Nothing is written while the selection waits, and the session reads as in progress:
			// the status has not observed the generation that selected it.
			Consistently(func(g Gomega) {
				s := a.get()
				g.Expect(s.Status.ObservedGeneration).To(BeNumerically("<", s.Generation))
				g.Expect(s.Status.PlanMode.Pending).To(BeFalse())
			}, hold/3, interval).Should(Succeed())
			Expect(fx.mgr.statusWrites.Load()).To(Equal(before), "no pending write while held")

			res := a.boundary(1, 2)
			Expect(res.asked).To(BeTrue(), "the agent asks: spec.planMode.active differs from status.planMode.selection")
			Expect(res.committed).To(BeTrue())
			Expect(res.notice).To(Equal(harness.NoticePlanOn))
			s := a.awaitStatus(true, false)
			Expect(s.Status.PlanMode.QueuedInTurn).To(BeZero())
			expectWrites(&fx.mgr.statusWrites, before+1, "one write: the answer, with the commit")
			Expect(activeValues(a.planModes())).To(Equal([]bool{true}))
			// The hold is over with the write: nothing more comes when its time would have run out.
			Consistently(fx.mgr.statusWrites.Load, hold+time.Second, interval).Should(Equal(before + 1))
		})

		It("writes the selection as pending when no report comes in time", func() {
			a := inTurn("late")
			before := stableWrites(&fx.mgr.statusWrites)
			setActive(a.key, T)
			Consistently(fx.mgr.statusWrites.Load, hold/3, interval).Should(Equal(before), "nothing written before the hold runs out")
			s := a.awaitStatus(false, true)
			Expect(s.Status.PlanMode.QueuedInTurn).To(BeEquivalentTo(1))
			Expect(readyReason(s)).To(Equal("False/" + agentsv1alpha1.ReasonSelectionPending))
			expectWrites(&fx.mgr.statusWrites, before+1, "the pending write, once its hold ran out")
			Expect(a.boundary(1, 2).committed).To(BeTrue())
			a.awaitStatus(true, false)
			expectWrites(&fx.mgr.statusWrites, before+2, "then the answer")
		})

		It("keeps a selection made in a turn that ended before its write for the next turn's first boundary, as the harness does", func() {
			a := inTurn("ended")
			setActive(a.key, T)
			// The turn ends once the manager has seen the selection in it and holds its write (a
			// selection first seen after the turn's end is one made between turns).
			Eventually(func() bool { _, held := fx.mgr.r.pending.madeInTurn(a.get(), true); return held }, timeout, interval).Should(BeTrue())
			a.endTurn(harness.TurnEndCompleted)
			s := a.awaitStatus(false, true)
			Expect(s.Status.PlanMode.QueuedInTurn).To(BeEquivalentTo(1), "made during turn 1")
			Expect(a.planModes()).To(BeEmpty(), "not appended between turns")
			a.startTurn(2)
			res := a.boundary(2, 1)
			Expect(res.committed).To(BeTrue())
			Expect(res.notice).To(Equal(harness.NoticePlanOn))
			a.awaitStatus(true, false)
			Expect(activeValues(a.planModes())).To(Equal([]bool{true}))
		})

		It("writes a selection made between turns at once", func() {
			a := newSession(fx.ns, "idle-held", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			before := stableWrites(&fx.mgr.statusWrites)
			setActive(a.key, T)
			Eventually(func() bool { return a.get().Status.PlanMode.Active }, hold/2, interval).Should(BeTrue())
			expectWrites(&fx.mgr.statusWrites, before+1, "one write: the commit")
		})
	})
}
