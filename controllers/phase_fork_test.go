package controllers

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// forkSpecs: a forked or spawned session (phase_fork.go).
func forkSpecs(fx *specFixture) {
	Describe("fork and spawn (reference 4.12)", func() {
		BeforeEach(fx.start)

		It("inherits the logged state of the copied completed-turn prefix; a spawned session starts inactive", func() {
			parent := newSession(fx.ns, "parent", nil, nil, fx.be().agentStore)
			parent.awaitStatus(false, false)
			parent.startTurn(1)
			setActive(parent.key, T)
			parent.awaitStatus(false, true)
			Expect(parent.boundary(1, 1).committed).To(BeTrue())
			parent.endStep(1, 1)
			parent.endTurn("completed")
			setActive(parent.key, F) // between turns, after the last turn/end: not inherited
			parent.awaitStatus(false, false)

			child := newSession(fx.ns, "child", nil, &agentsv1alpha1.ForkSource{SessionID: parent.sid}, fx.be().agentStore)
			as := child.awaitStatus(true, false)
			Expect(as.Status.PlanMode.NextSeq).To(BeEquivalentTo(parent.tail().NextSeq - 1))
			Expect(child.planModes()).To(HaveLen(1), "the inherited plan/mode only; nothing appended")
			Expect(as.Status.PlanMode.Notice).To(BeNil(), "an inherited plan/mode owes no notice")
			Expect(eventReasons(child.key)).NotTo(ContainElement(HavePrefix("Warning/")), "seeding a fork needs no one")

			spawned := newSession(fx.ns, "spawned", nil, nil, fx.be().agentStore)
			spawned.awaitStatus(false, false)
			Expect(spawned.planModes()).To(BeEmpty())

			// Selections work on a forked session as on any other.
			setActive(child.key, F)
			child.awaitStatus(false, false)
			Expect(activeValues(child.planModes())).To(Equal([]bool{true, false}))
		})
	})
}
