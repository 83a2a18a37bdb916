package agentsdk_test

import (
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

var _ = Describe("exit_plan_mode", func() {
	// planModeTurn opens a turn in plan mode (a plan/mode the manager would have written).
	planModeTurn := func(f *fixture) {
		_, err := store.Append(suiteCtx, f.sessionID, []harness.Event{harness.PlanModeEvent(0, true)})
		Expect(err).NotTo(HaveOccurred())
		_, err = f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
	}

	It("outside plan mode answers as the harness answers a tool the step does not admit", func() {
		f := setup(false)
		_, err := f.agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		_, err = f.agent.ExitPlanMode(suiteCtx, "# Plan\n", time.Minute)
		var ee *agentsdk.ExitError
		Expect(errors.As(err, &ee)).To(BeTrue(), "got %v", err)
		Expect(ee.Code).To(Equal(agentsdk.ExitUnknownTool))
		Expect(ee.ResultText()).To(Equal(`Error: unknown tool "exit_plan_mode"`))
		Expect(f.api.Writes()).To(BeZero(), "nothing posted")
	})

	It("fails with the harness's no-channel text when no manager opens the review within the bound", func() {
		f := setup(false) // no manager answers this session
		planModeTurn(f)
		start := time.Now()
		_, err := f.agent.ExitPlanMode(suiteCtx, "# Plan\n\n1. do it\n", time.Hour)
		took := time.Since(start)
		var ee *agentsdk.ExitError
		Expect(errors.As(err, &ee)).To(BeTrue(), "got %v", err)
		Expect(ee.Code).To(Equal(agentsdk.ExitNoChannel))
		Expect(ee.ResultText()).To(Equal("Error: " + harness.ExitErrNoChannel))
		Expect(took).To(BeNumerically(">=", agentsdk.ReviewOpenWait))
		Expect(took).To(BeNumerically("<", agentsdk.ReviewOpenWait+5*time.Second), "not the caller's hour")
		Eventually(func() bool { a := f.get().Status.Agent; return a == nil || a.Review == nil }).
			WithTimeout(10*time.Second).Should(BeTrue(), "the post nobody opened is withdrawn")
	})
})
