package controllers

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// boundarySpecs: the agent's step boundary (phase_boundary.go).
func boundarySpecs(fx *specFixture) {
	Describe("the step boundary (reference 4.6, 4.7)", func() {
		BeforeEach(fx.start)

		It("flushes a pending selection at the boundary, before step/start, with one notice and at most 3 API writes", func() {
			a := newSession(fx.ns, "flush", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			a.startTurn(1)
			r := a.boundary(1, 1)
			Expect(r.asked).To(BeFalse(), "nothing pending: no API write at the step")
			Expect(a.apiWrites).To(BeZero())
			a.endStep(1, 1)

			before := stableWrites(&fx.mgr.statusWrites)
			setActive(a.key, T)
			a.awaitStatus(false, true)
			r = a.boundary(1, 2)
			Expect(r.asked).To(BeTrue())
			Expect(r.ack.Result).To(Equal(agentsv1alpha1.BoundaryAdmitted))
			Expect(r.committed).To(BeTrue())
			Expect(r.notice).To(Equal(harness.NoticePlanOn))
			Expect(r.ack.NextSeq).To(Equal(r.ack.Seq + 1))
			a.awaitStatus(true, false)
			expectWrites(&fx.mgr.statusWrites, before+2, "pending + acknowledgement")
			Expect(a.apiWrites).To(Equal(1), "the agent's one report")

			pm := a.seqOf(harness.TypePlanMode)
			Expect(pm).To(Equal([]int64{r.ack.Seq}))
			stepStarts := a.seqOf(harness.TypeStepStart)
			Expect(stepStarts[1]).To(Equal(pm[0]+1), "plan/mode lands right before the step's step/start")

			// A second boundary: nothing pending, no write, no second notice.
			a.endStep(1, 2)
			r = a.boundary(1, 3)
			Expect(r.asked).To(BeFalse())
			Expect(r.notice).To(BeEmpty())
			Expect(r.committed).To(BeTrue())
			Expect(a.notices).To(Equal([]string{harness.NoticePlanOn}))
		})

		It("drops an answer's notice with the next write once the step it admitted has started", func() {
			a := newSession(fx.ns, "acknotice", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			a.startTurn(1)
			a.boundary(1, 1) // the model is told plan mode is off
			a.endStep(1, 1)
			setActive(a.key, T)
			a.awaitStatus(false, true)
			r := a.boundary(1, 2)
			Expect(r.notice).To(Equal(harness.NoticePlanOn))
			a.endStep(1, 2)
			a.endTurn(harness.TurnEndCompleted)

			setActive(a.key, F) // committed between turns: the next write
			as := a.awaitStatus(false, false)
			ack := as.Status.PlanMode.LastBoundary
			Expect(ack).NotTo(BeNil())
			Expect([]int64{ack.Turn, ack.Step, ack.Seq}).To(Equal([]int64{r.ack.Turn, r.ack.Step, r.ack.Seq}), "the same answer")
			Expect(ack.Notice).To(BeEmpty(), "the step it admitted started: no agent reads its notice again")
			Expect(as.Status.PlanMode.Notice).NotTo(BeNil(), "the between-turns commit owes its own notice")

			a.startTurn(2)
			Expect(a.boundary(2, 1).notice).To(Equal(harness.NoticeDefault), "the owed notice is narrated at the next turn's first step")
			Expect(a.notices).To(Equal([]string{harness.NoticePlanOn, harness.NoticeDefault}))
		})

		DescribeTable("narration at the boundary",
			func(initial *bool, preHeader bool, flips []bool, wantActive bool, wantNotices []string, wantPlanModes int) {
				a := newSession(fx.ns, "narr", initial, nil, fx.be().agentStore)
				a.awaitStatus(initial != nil && *initial, false)
				a.startTurn(1)
				if preHeader {
					r := a.boundary(1, 1) // logs a header that describes the initial state
					Expect(r.notice).To(BeEmpty())
					a.endStep(1, 1)
				}
				for _, f := range flips {
					setActive(a.key, ptr.To(f))
					Eventually(func() *bool { return a.get().Status.PlanMode.Selection }, timeout, interval).Should(Equal(ptr.To(f)))
				}
				r := a.boundary(1, 2)
				Expect(r.committed).To(Equal(wantActive))
				a.endStep(1, 2)
				r = a.boundary(1, 3) // narrates once only
				Expect(r.notice).To(BeEmpty())
				Expect(a.notices).To(Equal(wantNotices))
				Expect(a.planModes()).To(HaveLen(wantPlanModes))
				a.awaitStatus(wantActive, false)
			},
			Entry("no header yet: no notice", nil, false, []bool{true}, true, []string(nil), 1),
			Entry("differs from the last header: narrated once", nil, true, []bool{true}, true, []string{harness.NoticePlanOn}, 1),
			Entry("back to default with the default wording", ptr.To(true), true, []bool{false}, false, []string{harness.NoticeDefault}, 2),
			Entry("net-zero flips: no append, no notice", nil, true, []bool{true, false}, false, []string(nil), 0),
			Entry("net-zero after a longer flip sequence", nil, true, []bool{true, false, true, false}, false, []string(nil), 0),
		)

		It("stays silent when the last header already describes the flushed state", func() {
			a := newSession(fx.ns, "silent", T, nil, fx.be().agentStore)
			a.awaitStatus(true, false)
			a.startTurn(1)
			Expect(a.boundary(1, 1).committed).To(BeTrue()) // header told T
			a.endStep(1, 1)
			a.endTurn("completed")
			setActive(a.key, F) // between turns: F, notice owed (told T)
			a.awaitStatus(false, false)
			a.startTurn(2)
			setActive(a.key, T) // queued during turn 2, before its first boundary
			a.awaitStatus(false, true)
			r := a.boundary(2, 1)
			Expect(r.committed).To(BeTrue())
			Expect(r.notice).To(BeEmpty(), "told T, flushed T: silent, and the owed 'default' notice is superseded")
			Expect(activeValues(a.planModes())).To(Equal([]bool{true, false, true}))
			Expect(a.notices).To(BeEmpty())
		})

		It("does not commit on request-recovery retries; the flip lands at the next turn's first step boundary with one notice", func() {
			a := newSession(fx.ns, "retry", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			a.startTurn(1)
			Expect(a.boundary(1, 1).committed).To(BeFalse())
			setActive(a.key, T) // at error settlement, during step 1
			a.awaitStatus(false, true)
			a.header(false, harness.HeaderReasonChange) // the retry reuses the frozen assembly: no boundary
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero(), "no boundary, no append")
			as := a.get()
			Expect(as.Status.PlanMode.Active).To(BeFalse())
			Expect(as.Status.PlanMode.Pending).To(BeTrue())

			a.endStep(1, 1)
			a.endTurn("completed")
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero(), "selected during turn 1: waits for a later turn's boundary")

			a.startTurn(2)
			r := a.boundary(2, 1)
			Expect(r.asked).To(BeTrue())
			Expect(r.committed).To(BeTrue())
			Expect(r.notice).To(Equal(harness.NoticePlanOn))
			a.endStep(2, 1)
			Expect(a.boundary(2, 2).notice).To(BeEmpty())
			Expect(a.notices).To(Equal([]string{harness.NoticePlanOn}), "one notice")

			pm := a.seqOf(harness.TypePlanMode)
			Expect(pm).To(HaveLen(1))
			stepEnd11 := a.seqOf(harness.TypeStepEnd)[0]
			stepStarts := a.seqOf(harness.TypeStepStart)
			Expect(stepEnd11).To(BeNumerically("<", pm[0]))
			Expect(pm[0]).To(BeNumerically("<", stepStarts[1]), "step/end(1,1) < plan/mode < step/start(2,1)")
			headers := a.seqOf(harness.TypeRequestHeader)
			Expect(headers).To(HaveLen(4))
		})

		It("makes the first request plan-shaped when selected before the first turn", func() {
			a := newSession(fx.ns, "first", T, nil, fx.be().agentStore)
			a.awaitStatus(true, false)
			a.startTurn(1)
			r := a.boundary(1, 1)
			Expect(r.committed).To(BeTrue())
			Expect(r.notice).To(BeEmpty())
			pm := a.seqOf(harness.TypePlanMode)
			headers := a.seqOf(harness.TypeRequestHeader)
			Expect(pm).To(Equal([]int64{0}))
			Expect(pm[0]).To(BeNumerically("<", headers[0]))
			evs := a.events()
			Expect(string(evs[headers[0]].Data)).To(ContainSubstring("You are in plan mode."))
			Expect(string(evs[headers[0]].Data)).To(ContainSubstring(`"reason":"initial"`))
		})

		It("refuses an invalid boundary report with a Failed ack, a condition and a Warning event, never appending", func() {
			a := newSession(fx.ns, "invalid", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			a.startTurn(1)
			setActive(a.key, T)
			a.awaitStatus(false, true)
			seq := a.tail().NextSeq
			a.report(1, 1, seq+5)
			ack := a.awaitAck(1, 1, seq+5)
			Expect(ack.Result).To(Equal(agentsv1alpha1.BoundaryFailed))
			Expect(ack.Message).To(ContainSubstring("status.agent.boundary.seq"))
			Eventually(func() string { return readyReason(a.get()) }, timeout, interval).Should(Equal("False/" + agentsv1alpha1.ReasonInvalidBoundary))
			Eventually(func() []string { return eventReasons(a.key) }, timeout, interval).Should(ContainElement("Warning/" + agentsv1alpha1.ReasonInvalidBoundary))
			a.report(2, 1, seq) // wrong turn
			Expect(a.awaitAck(2, 1, seq).Message).To(ContainSubstring("status.agent.boundary.turn"))
			Expect(a.planModes()).To(BeEmpty())

			// A valid report afterwards is admitted and clears the condition.
			r := a.boundary(1, 1)
			Expect(r.committed).To(BeTrue())
			Eventually(func() string { return readyReason(a.get()) }, timeout, interval).Should(Equal("True/InSync"))

			// A step reported again at a later seq (the agent appended something else instead
			// of its step/start) is refused: it was admitted already.
			a.endStep(1, 1)
			first := a.tail().NextSeq
			a.report(1, 2, first)
			Expect(a.awaitAck(1, 2, first).Result).To(Equal(agentsv1alpha1.BoundaryAdmitted))
			a.header(true, harness.HeaderReasonChange)
			a.report(1, 2, first+1)
			again := a.awaitAck(1, 2, first+1)
			Expect(again.Result).To(Equal(agentsv1alpha1.BoundaryFailed))
			Expect(again.Message).To(ContainSubstring("already admitted"))
			Expect(a.planModes()).To(HaveLen(1))
		})
	})
}
