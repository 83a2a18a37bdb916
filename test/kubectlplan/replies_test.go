package kubectlplan_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// Each reply is checked against the log state it describes: the plan/mode event (where it
// landed: between turns, or at which step boundary), the turn a message started or the step
// that recorded it, and nothing written when the reply says nothing changed.
var _ = Describe("replies say what happened, as the session log shows it", func() {
	It("a message to an idle agent: plan mode on where the log has it, and a turn started for the message", func() {
		a := newSession("idle")
		a.serve()
		from := a.tail().NextSeq
		out := kplan("message", a.name, "look", "around").OK()
		evs := a.events()
		pms := planModes(evs)
		Expect(pms).To(HaveLen(1))
		Expect(pms[0].active).To(BeTrue())
		turn, step, startedAfter, found := messageAt(evs, "look around", from)
		Expect(found).To(BeTrue(), "the agent recorded the message before the reply")
		Expect(startedAfter).To(BeTrue(), "in a turn the agent started for it")
		Expect(step).To(Equal(int64(1)))
		// The write carries both the selection and the message: the manager may commit between
		// turns, or the agent's turn for the message may start first, and its first step's
		// boundary applies the selection. The reply names whichever the log has.
		first := fmt.Sprintf("Plan mode on. Use kubectl plan off %s to leave.", a.name)
		if pms[0].turnOpen {
			Expect([]int64{pms[0].turn, pms[0].step}).To(Equal([]int64{turn, 1}))
			first = fmt.Sprintf("Plan mode on (applied at the agent's step 1 of turn %d). Use kubectl plan off %s to leave.", turn, a.name)
		}
		Expect(out).To(Equal(first + "\n" + fmt.Sprintf("Message delivered: the agent started turn %d with it.\n", turn)))
	})

	It("plan mode already committed: already on, and nothing is written", func() {
		a := newSession("again")
		Expect(kplan("on", a.name).OK()).To(Equal(fmt.Sprintf("Plan mode on. Use kubectl plan off %s to leave.\n", a.name)))
		Eventually(func() bool { return a.tail().Active }).Should(BeTrue())
		seq, rv := a.tail().NextSeq, a.get().ResourceVersion
		Expect(kplan("on", a.name).OK()).To(Equal(fmt.Sprintf("Plan mode is already on. Use kubectl plan off %s to leave.\n", a.name)))
		Expect(a.tail().NextSeq).To(Equal(seq), "nothing appended")
		Expect(a.get().ResourceVersion).To(Equal(rv), "nothing written")

		Expect(kplan("off", a.name).OK()).To(Equal("Plan mode off.\n"))
		pms := planModes(a.events())
		Expect(pms[len(pms)-1].active).To(BeFalse())
		Expect(pms[len(pms)-1].turnOpen).To(BeFalse(), "committed between turns")
		seq = a.tail().NextSeq
		Expect(kplan("off", a.name).OK()).To(Equal("Plan mode is already off.\n"))
		Expect(a.tail().NextSeq).To(Equal(seq))
	})

	It("during a turn: queued for the next step, applied at that boundary; a message waits for that step; an entry undone before it is cancelled", func() {
		a := newSession("turn")
		a.StartTurn()
		a.NextStep()
		Expect(kplan("on", a.name).OK()).To(Equal(fmt.Sprintf("Entering plan mode (applies from the next step). Use kubectl plan off %s to leave.\n", a.name)))
		Expect(planModes(a.events())).To(BeEmpty(), "nothing logged until the boundary")
		Expect(kplan("off", a.name).OK()).To(Equal(harness.ReplyOffCancelled + "\n"))
		a.NextStep()
		Expect(planModes(a.events())).To(BeEmpty(), "the cancelled entry never reaches the log")

		beforeMessage := a.tail().NextSeq
		out := kplan("message", a.name, "draft", "it").OK()
		Expect(out).To(Equal(fmt.Sprintf("Entering plan mode (applies from the next step). Use kubectl plan off %s to leave.\n", a.name) +
			"Message queued for the agent's next step, after the messages queued before it.\n"))
		res := a.NextStep()
		Expect(res.Active).To(BeTrue())
		evs := a.events()
		pms := planModes(evs)
		Expect(pms).To(HaveLen(1))
		Expect(pms[0].turnOpen).To(BeTrue())
		Expect([]int64{pms[0].turn, pms[0].step}).To(Equal([]int64{a.Turn, a.Step}), "applied at this step's boundary")
		turn, step, startedAfter, found := messageAt(evs, "draft it", beforeMessage)
		Expect(found).To(BeTrue())
		Expect([]int64{turn, step}).To(Equal([]int64{a.Turn, a.Step}), "the message is this step's input")
		Expect(startedAfter).To(BeFalse())
		a.EndTurn()
	})

	It("a message while no agent takes it: committed, and queued without a turn", func() {
		a := newSession("noagent")
		out := kplan("message", a.name, "anyone", "there?").OK()
		Expect(out).To(Equal(fmt.Sprintf("Plan mode on. Use kubectl plan off %s to leave.\n", a.name) +
			"Message queued; the agent has not taken it yet (an idle agent starts a turn with it).\n"))
		Expect(a.tail().Turn).To(BeZero(), "no turn was started")
		_, _, _, found := messageAt(a.events(), "anyone there?", 0)
		Expect(found).To(BeFalse())
	})
})
