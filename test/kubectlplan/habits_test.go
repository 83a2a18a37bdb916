package kubectlplan_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// The kubectl habits, through the real kubectl, in make run's environment.
var _ = Describe("the kubectl habits", func() {
	It("completes subcommands and session names through kubectl's plugin completion (kubectl_complete-plan)", func() {
		a := newSession("complete")
		out := kubectl(nil, "__complete", "plan", "").OK()
		Expect(out).To(ContainSubstring("status\t"))
		Expect(out).To(ContainSubstring(a.name))
		out = kubectl(nil, "__complete", "plan", "status", a.name[:6]).OK()
		Expect(strings.Split(out, "\n")).To(ContainElement(a.name))
		Expect(kubectl(nil, "__complete", "plan", "list", "-o", "").OK()).To(ContainSubstring("json\nyaml\n"))
	})

	It("answers a mistyped session name with the names it is close to", func() {
		a := newSession("payments")
		// One letter off, never the name itself (a random name may end in the letter put in).
		last := "x"
		if strings.HasSuffix(a.name, last) {
			last = "y"
		}
		typo := a.name[:len(a.name)-1] + last
		kplan("status", typo).Fails(`no AgentSession "`+typo+`" in namespace "default": did you mean "`+a.name+`"?`, "kubectl plan list -n default")
	})

	It("reads long text from a file or stdin, and refuses one over the CRD's limit before writing anything", func() {
		a := newSession("file")
		text := "# Notes\n\n" + strings.Repeat("word ", 2000)
		out := kubectl(strings.NewReader(text), "plan", "message", a.name, "--file", "-").OK()
		Expect(out).To(HavePrefix("Plan mode on."))
		q := a.get().Spec.SteerQueue
		Expect(q).To(HaveLen(1))
		Expect(q[0].Text).To(Equal(strings.TrimSpace(text)))
		rv := a.get().ResourceVersion
		kubectl(strings.NewReader(strings.Repeat("x", 70000)), "plan", "message", a.name, "--file", "-").
			Fails("the message is 70000 characters, and spec.steerQueue[].text holds at most 65536")
		Expect(a.get().ResourceVersion).To(Equal(rv), "nothing was written")
	})

	It("review --wait waits for the plan, revise takes the feedback as words, and log -f shows it all as it happens", func() {
		a := newSession("follow")
		Expect(kplan("on", a.name).OK()).To(ContainSubstring("Plan mode on."))
		follow := startKubectl("plan", "log", a.name, "-f")
		Eventually(follow.out.String).Should(ContainSubstring("plan mode on (active=true)"))
		review := startKubectl("plan", "review", a.name, "--wait")
		Eventually(review.out.String).Should(ContainSubstring("to present a plan (Ctrl-C stops)"))

		a.StartTurn()
		a.NextStep()
		exited := a.CallExit("# Fix the flake\n\n1. Add the lock.\n")
		Eventually(review.done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
		Expect(review.out.String()).To(ContainSubstring("Plan:       Fix the flake\n"))
		Eventually(follow.out.String).Should(MatchRegexp(`review\s+"Fix the flake" \(review \S+, turn 1\) awaits a decision: kubectl plan review ` + a.name))

		Expect(kplan("revise", a.name, "cover", "the", "rollback").OK()).To(ContainSubstring(`Sent "Fix the flake"`))
		Eventually(exited).WithTimeout(30 * time.Second).Should(Receive(HaveField("Logged", BeNil())))
		Eventually(follow.out.String).Should(ContainSubstring(harness.KeepPlanningText("cover the rollback")[:40]))
		a.EndTurn()
		Eventually(follow.out.String).Should(MatchRegexp(`turn/end\s+turn 1 \(completed\)`))
		follow.interrupt()
		Expect(kplan("log", a.name, "--tail", "1").OK()).To(MatchRegexp(`^SEQ\s+TIME\s+EVENT\s+DETAIL\n\d+\s+\S+\s+turn/end\s+turn 1 \(completed\)\n$`))
	})

	It("list -w prints a line for each change until Ctrl-C", func() {
		a := newSession("watch")
		watch := startKubectl("plan", "list", "-w")
		Eventually(watch.out.String).Should(MatchRegexp(`(?m)^` + a.name + `\s+false\s+True\s`))
		Expect(kplan("on", a.name).OK()).To(ContainSubstring("Plan mode on."))
		Eventually(watch.out.String).Should(MatchRegexp(`(?m)^` + a.name + `\s+true\s+true\s+True\s`))
		watch.interrupt()
	})
})
