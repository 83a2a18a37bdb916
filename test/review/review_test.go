package review_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/controllers"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/refagent"
)

const (
	offCommitted = "Plan mode off.\n"
	offCancelled = "Plan mode entry cancelled.\n"
	offInactive  = "Plan mode is already off.\n"

	plan = "# Fix the flake\n\n1. Find the race in the resume path.\n2. Add the lock.\n"
)

func bp(b bool) *bool { return &b }

// inPlanMode creates a session that starts in plan mode (committed by the manager between
// turns) and opens a turn with one step.
func inPlanMode(spec func(*agentsv1alpha1.AgentSessionSpec)) *agent {
	GinkgoHelper()
	a := newSession(func(s *agentsv1alpha1.AgentSessionSpec) {
		s.PlanMode.Active = bp(true)
		if spec != nil {
			spec(s)
		}
	})
	Eventually(func() bool { return a.get().Status.PlanMode.Active }).WithTimeout(20 * time.Second).Should(BeTrue())
	a.StartTurn()
	r := a.NextStep("plan the fix")
	Expect(r.Active).To(BeTrue())
	Expect(r.ExitAdmitted).To(BeTrue())
	return a
}

// The entering replies, as the plugin prints them for a session of namespace ns: the harness's
// texts with the kubectl command that leaves plan mode in place of /plan off.
func onCommitted(name string) string {
	return "Plan mode on. Use kubectl plan off " + name + " -n " + ns + " to leave.\n"
}

func onDeferred(name string) string {
	return "Entering plan mode (applies from the next step). Use kubectl plan off " + name + " -n " + ns + " to leave.\n"
}

var _ = Describe("plan review through kubectl plan, the manager and the agent SDK", func() {
	It("approve: only a reviewer may decide; the exit is silent and applied at the next step boundary", func() {
		a := newSession(nil)
		By("the toggler enters plan mode between turns (the manager commits it)")
		Expect(kplan(toggler, "on", a.name).OK()).To(Equal(onCommitted(a.name)))
		a.StartTurn()
		r := a.NextStep("plan the fix")
		Expect(r.Active).To(BeTrue())
		Expect(r.Section).To(Equal(planSection))

		By("the agent presents its plan")
		ch := a.CallExit(plan)
		id := a.postedReview()
		out := kplan(viewer, "review", a.name).OK()
		Expect(out).To(HavePrefix("Plan:       Fix the flake\nRevision:   1 (the session's first plan)\nReview ID:  " + id + "\nTurn:       1\n"))
		Expect(out).To(HaveSuffix("\n\n" + plan))
		Expect(kplan(viewer, "status", a.name).OK()).
			To(MatchRegexp(`Review:\s+"Fix the flake" \(revision 1, review ` + id + `, turn 1\): Pending[^\n]*, awaiting kubectl plan approve\|revise\|dismiss ` + a.name + `\n`))

		By("toggling does not carry the right to approve")
		kplan(toggler, "approve", a.name).Fails("not allowed to decide the plan review",
			`may not decide plan reviews: deciding needs verb "approve" on agentsessions/review`)
		kplan(viewer, "approve", a.name).Fails("not allowed to decide the plan review", `"patch" permission on agentsessions.agents.harness.dev`)
		Expect(a.get().Spec.ReviewVotes).To(BeEmpty())
		Consistently(ch).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "no decision, no answer")

		By("the reviewer approves")
		Expect(kplan(reviewer, "approve", a.name, "--review-id", id).OK()).To(Equal(`Approved "Fix the flake" (review ` + id + "): the agent leaves plan mode at its next step.\n"))
		e := receive(ch)
		Expect(e.Err).NotTo(HaveOccurred())
		Expect(e.Result).To(Equal(agentsdk.ExitResult{Approved: true, ReviewID: id, Text: harness.ExitApprovedText}))

		as := a.get()
		Expect(as.Status.Review.Phase).To(Equal(agentsv1alpha1.ReviewApproved))
		Expect(as.Status.PlanMode.Active).To(BeTrue(), "nothing is appended at approval")
		Expect(as.Status.PlanMode.PendingActive).To(Equal(bp(false)))
		Expect(as.Status.PlanMode.PendingSource).To(Equal(agentsv1alpha1.PendingSourceExit))
		Expect(kplan(viewer, "status", a.name).OK()).To(MatchRegexp(`Pending:\s+false \(off\) at the agent's next step boundary \(an approved plan's exit, not narrated\)\n`))
		kplan(reviewer, "dismiss", a.name).Fails(`nothing under review: the plan "Fix the flake" (review ` + id + `) was already decided: Approved`)

		By("the next step boundary commits the exit, with no notice")
		r = a.NextStep()
		Expect(r.Asked).To(BeTrue())
		Expect(r.Active).To(BeFalse())
		Expect(r.ExitAdmitted).To(BeFalse())
		Expect(r.Notice).To(BeEmpty(), "an approved exit is never narrated: the tool result is the narration")
		a.EndTurn()
		evs := a.events()
		Expect(types(evs)).To(Equal([]string{
			`plan/mode {"active":true}`, // the between-turns entry
			"turn/start", "step/start", "user/message", "request/header",
			"tool/call", "tool/result", "step/end",
			`plan/mode {"active":false}`, "step/start", "request/header", "step/end", "turn/end",
		}))

		log := kplan(viewer, "log", a.name, "--store", storeURL).OK()
		Expect(log).To(MatchRegexp(`tool/result\s+exit_plan_mode result \(call \S+, ok\): Plan approved — plan mode exited; carry out the plan starting with your next step\.`))
		Expect(log).To(MatchRegexp(`plan/mode\s+plan mode off \(active=false\) by the approval of revision 1 \(completed by rita@example.com\)\n` +
			`\S+\s+\S+\s+step/start\s+turn 1 step 2\n` +
			`\S+\s+\S+\s+request/header\s+reason=change plan=off tools=\[read,write\]\n`))
		Expect(log).NotTo(ContainSubstring("notice"))

		By("entering plan mode again after the approved exit (the approval set spec.planMode.active to false)")
		Expect(a.get().Spec.PlanMode.Active).To(Equal(bp(false)))
		Expect(kplan(toggler, "on", a.name).OK()).To(Equal(onCommitted(a.name)))
		Eventually(func() bool { return a.get().Status.PlanMode.Active }).WithTimeout(10 * time.Second).Should(BeTrue())
		last := a.events()
		Expect(types(last[len(last)-1:])).To(Equal([]string{`plan/mode {"active":true}`}))
	})

	It("keep planning: the feedback comes back verbatim, without feedback the generic text; a stale review id is refused; Approve with feedback is not consent", func() {
		a := inPlanMode(nil)

		ch := a.CallExit("# Plan A\n")
		id1 := a.postedReview()
		Expect(kplan(reviewer, "revise", a.name, "--feedback", "consider the resume path").OK()).To(Equal(
			`Sent "Plan A" (review ` + id1 + ") back with your feedback: the agent keeps planning; the session stays in plan mode.\n"))
		ee := exitErr(receive(ch).Err)
		Expect(ee.Code).To(Equal(agentsdk.ExitKeepPlanning))
		Expect(ee.ResultText()).To(Equal("Error: The user chose to keep planning; their feedback: consider the resume path"))

		ch = a.CallExit("# Plan B\n")
		id2 := a.postedReview()
		Expect(id2).NotTo(Equal(id1))
		kplan(reviewer, "approve", a.name, "--review-id", id1).Fails(`stale review id "` + id1 + `": the plan under review is now "Plan B" (review ` + id2 + `)`)
		By("a raw decision naming the older plan is refused at admission too")
		run(reviewer, "patch", "agentsession", a.name, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"review":{"reviewID":%q,"decision":"Approve"}}}`, id1)).
			Refused(fmt.Sprintf("the plan under review is %q (status.agent.review.id): a decision must quote that id", id2))
		Expect(kplan(reviewer, "revise", a.name).OK()).To(Equal(`Sent "Plan B" (review ` + id2 + ") back: the agent keeps planning; the session stays in plan mode.\n"))
		ee = exitErr(receive(ch).Err)
		Expect(ee.ResultText()).To(Equal("Error: The user chose to keep planning; revise the plan and present it again."))

		By("Approve carrying feedback is feedback, not consent")
		ch = a.CallExit("# Plan C\n")
		id3 := a.postedReview()
		patched := run(reviewer, "patch", "agentsession", a.name, "--type", "merge", "-p",
			fmt.Sprintf(`{"spec":{"review":{"reviewID":%q,"decision":"Approve","feedback":"but rename it","planSHA256":null}}}`, id3))
		patched.OK()
		Expect(patched.Err).To(ContainSubstring("Warning: spec.review.feedback with decision Approve is not consent: the manager reads it as KeepPlanning"))
		ee = exitErr(receive(ch).Err)
		Expect(ee.ResultText()).To(Equal("Error: The user chose to keep planning; their feedback: but rename it"))
		as := a.get()
		Expect(as.Status.Review.Phase).To(Equal(agentsv1alpha1.ReviewKeptPlanning))
		Expect(as.Status.PlanMode.Active).To(BeTrue())
		Expect(as.Status.PlanMode.PendingActive).To(BeNil(), "no exit recorded")

		r := a.NextStep()
		Expect(r.Active).To(BeTrue(), "keep-planning leaves plan mode on")
		a.EndTurn()
	})

	It("dismiss: {approved: false}, the turn concludes and plan mode stays on", func() {
		a := inPlanMode(nil)
		ch := a.CallExit(plan)
		id := a.postedReview()
		Expect(kplan(reviewer, "dismiss", a.name).OK()).To(Equal(
			`Dismissed the review of "Fix the flake" (review ` + id + "): the agent stops its turn; the session stays in plan mode until you run kubectl plan off " + a.name + ".\n"))
		e := receive(ch)
		Expect(e.Err).NotTo(HaveOccurred())
		Expect(e.Result).To(Equal(agentsdk.ExitResult{Approved: false, ConcludeTurn: true, ReviewID: id, Text: harness.ExitErrDismissed}))
		a.EndTurn() // the agent concludes its turn

		as := a.get()
		Expect(as.Status.PlanMode.Active).To(BeTrue())
		Expect(as.Status.PlanMode.PendingActive).To(BeNil())
		evs := a.events()
		Expect(evs[len(evs)-3].Type).To(Equal("tool/result"))
		res, ok := harness.ReadToolResult(evs[len(evs)-3].Data)
		Expect(ok).To(BeTrue())
		Expect(res.IsError).To(BeFalse())
		Expect(res.Text).To(Equal(harness.ExitErrDismissed))
		Expect(types(evs[len(evs)-2:])).To(Equal([]string{"step/end", "turn/end"}))
		Expect(kplan(viewer, "review", a.name).OK()).To(MatchRegexp(`State:\s+Dismissed by rita@example.com at `))
	})

	It("expiry: a review nobody answers within spec.reviewTimeout fails the call cleanly", func() {
		a := inPlanMode(func(s *agentsv1alpha1.AgentSessionSpec) {
			s.ReviewTimeout = &metav1.Duration{Duration: 5 * time.Second}
		})
		ch := a.CallExit(plan)
		id := a.postedReview()
		as := a.get()
		Expect(as.Status.Review.ExpiresAt).NotTo(BeNil())
		Expect(as.Status.Review.ExpiresAt.Time).To(Equal(as.Status.Review.OpenedAt.Add(5*time.Second)), "counted from when the manager opened it")
		Expect(kplan(viewer, "review", a.name).OK()).To(MatchRegexp(`Expires:\s+\d{4}-`))

		ee := exitErr(receive(ch).Err)
		Expect(ee.Code).To(Equal(agentsdk.ExitExpired))
		Expect(ee.ReviewID).To(Equal(id))
		Expect(ee.Message).To(Equal(controllers.ReviewExpiredText(5 * time.Second)))
		Expect(ee.Message).To(Equal("The plan review expired after 5s without an answer; stay in plan mode, stop here, and wait for the user's message."))
		kplan(reviewer, "approve", a.name).Fails("was already decided: Expired")
		run(reviewer, "patch", "agentsession", a.name, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"review":{"reviewID":%q,"decision":"Approve"}}}`, id)).
			Refused("is already closed (Expired)")
		Expect(a.get().Status.PlanMode.Active).To(BeTrue())
		a.EndTurn()
	})

	It("an agent that stops waiting withdraws its plan, so nobody can approve it afterwards", func() {
		a := inPlanMode(nil)
		_, err := a.Client.ExitPlanMode(ctx, plan, time.Second)
		ee := exitErr(err)
		Expect(ee.Code).To(Equal(agentsdk.ExitAborted))
		Expect(ee.ResultText()).To(Equal("Error: ask_user_question was aborted before the user answered"))
		Eventually(func(g Gomega) {
			as := a.get()
			g.Expect(as.Status.Agent.Review).To(BeNil(), "withdrawn by the agent")
			g.Expect(as.Status.Review).To(BeNil(), "the manager drops the pending review")
		}).WithTimeout(10 * time.Second).Should(Succeed())
		kplan(reviewer, "approve", a.name).Fails("nothing under review")
		Expect(a.get().Status.PlanMode.Active).To(BeTrue())
		a.EndTurn()
	})

	It("a restarted agent withdraws the undecided review its previous process left", func() {
		a := inPlanMode(nil)
		By("a previous agent process posted a plan and died before an answer")
		agentC, err := client.New(impersonate(agentUser), client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		body := `{"status":{"agent":{"review":{"id":"r-orphan","plan":"# Orphan\n","turn":1}}}}`
		Expect(agentC.Status().Patch(ctx, a.get(), client.RawPatch(k8stypes.MergePatchType, []byte(body)))).To(Succeed())
		Eventually(func() *agentsv1alpha1.ReviewStatus { return a.get().Status.Review }).WithTimeout(10 * time.Second).
			Should(HaveField("Phase", agentsv1alpha1.ReviewPending))

		By("the new process starts")
		c, err := agentsdk.New(ctx, agentsdk.Options{Config: impersonate(agentUser), Namespace: ns, Name: a.name, Store: store})
		Expect(err).NotTo(HaveOccurred())
		defer c.Close()
		Expect(a.get().Status.Agent.Review).To(BeNil())
		Eventually(func() *agentsv1alpha1.ReviewStatus { return a.get().Status.Review }).WithTimeout(10 * time.Second).Should(BeNil())
		kplan(reviewer, "approve", a.name).Fails("nothing under review")
	})

	It("admits exit_plan_mode only in committed plan mode, and only with a '# ' heading", func() {
		a := newSession(nil)
		a.StartTurn()
		r := a.NextStep("hello")
		Expect(r.ExitAdmitted).To(BeFalse())
		_, err := a.Client.ExitPlanMode(ctx, plan, 5*time.Second)
		ee := exitErr(err)
		Expect(ee.Code).To(Equal(agentsdk.ExitUnknownTool))
		Expect(ee.ResultText()).To(Equal("Error: " + agentsdk.UnknownToolMessage))
		a.EndTurn()

		Expect(kplan(toggler, "on", a.name).OK()).To(Equal(onCommitted(a.name)))
		a.StartTurn()
		Expect(a.NextStep().ExitAdmitted).To(BeTrue())
		for _, bad := range []string{"", "do things", "## Not level one\n", "  \n"} {
			_, err := a.Client.ExitPlanMode(ctx, bad, 5*time.Second)
			ee := exitErr(err)
			Expect(ee.Code).To(Equal(agentsdk.ExitInvalidPlan), "plan %q", bad)
			Expect(ee.ResultText()).To(Equal("Error: exit_plan_mode requires a non-empty markdown plan starting with a # heading"))
		}
		if ag := a.get().Status.Agent; ag != nil {
			Expect(ag.Review).To(BeNil(), "a refused call posts nothing for review")
		}
		kplan(reviewer, "review", a.name).Fails("nothing under review")
		a.EndTurn()
	})
})

var _ = Describe("kubectl plan replies from the real manager's decision", func() {
	It("answers committed, queued and cancelled as the log decides, and delivers the message at the next step", func() {
		a := newSession(nil)
		a.StartTurn()
		a.NextStep("hello") // a turn is open in the log; the agent wrote nothing to the API
		Expect(a.get().Status.PlanMode.TurnOpen).To(BeFalse(), "the status does not show the open turn")
		Expect(kplan(viewer, "status", a.name).OK()).To(MatchRegexp(`Turn:\s+none open at the manager's last status write \(the agent may have opened one since\)\n`))
		Expect(kplan(viewer, "status", a.name, "--store", storeURL).OK()).To(MatchRegexp(`Turn:\s+1 open, step 1 \(live from the log`))

		Expect(kplan(toggler, "on", a.name).OK()).To(Equal(onDeferred(a.name)), "queued: only the manager sees the open turn")
		Expect(kplan(toggler, "off", a.name).OK()).To(Equal(offCancelled))
		Expect(kplan(toggler, a.name, "draft", "the", "migration").OK()).To(Equal(onDeferred(a.name)+"Message queued for the agent's next step, after the messages queued before it.\n"),
			"the manager's status after the write shows the open turn")

		r := a.NextStep()
		Expect(r.Active).To(BeTrue())
		Expect(r.Notice).To(Equal(harness.NoticePlanOn))
		evs := a.events()
		Expect(types(evs[len(evs)-6:])).To(Equal([]string{"step/end", `plan/mode {"active":true}`, "step/start", "user/message", "user/message", "request/header"}))
		var m harness.UserMessage
		Expect(json.Unmarshal(evs[len(evs)-3].Data, &m)).To(Succeed())
		Expect(m.Content[0].Text).To(Equal("draft the migration"))
		Expect(m.Source.Kind).To(Equal("user"))
		Expect(json.Unmarshal(evs[len(evs)-2].Data, &m)).To(Succeed())
		Expect(m.Source.Kind).To(Equal("plugin"))
		Expect(m.Content[0].Text).To(Equal(harness.NoticePlanOn))
		Eventually(func() string { return a.get().Status.Agent.SteerID }).Should(Equal(a.get().Spec.SteerQueue[0].ID))
		a.EndTurn()

		Expect(kplan(toggler, "off", a.name).OK()).To(Equal(offCommitted))
		Expect(kplan(toggler, "off", a.name).OK()).To(Equal(offInactive))
		log := kplan(viewer, "log", a.name, "--store", storeURL).OK()
		Expect(strings.Count(log, "plan/mode")).To(Equal(2))
		Expect(log).To(ContainSubstring("plan-mode notice (plugin): The user switched this session to plan mode."))
		evs = a.events()
		Expect(evs[len(evs)-1].Type).To(Equal(harness.TypePlanMode))
	})
})

var _ = Describe("the reference agent's exit instruction", func() {
	script := func(s string) refagent.Script {
		GinkgoHelper()
		sc, err := refagent.ParseScript(strings.NewReader(s))
		Expect(err).NotTo(HaveOccurred())
		return sc
	}
	runAgent := func(a *agent, s string, steps *[]refagent.StepRecord) <-chan error {
		done := make(chan error, 1)
		go func() {
			defer GinkgoRecover()
			_, err := refagent.Run(ctx, refagent.Options{Client: a.Client, Script: script(s), OnStep: func(r refagent.StepRecord) { *steps = append(*steps, r) }})
			done <- err
		}()
		return done
	}
	const exitScript = "turn plan the fix\nstep\nexit # Fix the flake\\n\\n1. Add the lock.\nstep\nend\n"

	It("approve: the reference agent leaves plan mode at its next step, silently", func() {
		a := newSession(func(s *agentsv1alpha1.AgentSessionSpec) { s.PlanMode.Active = bp(true) })
		Eventually(func() bool { return a.get().Status.PlanMode.Active }).WithTimeout(20 * time.Second).Should(BeTrue())
		var steps []refagent.StepRecord
		done := runAgent(a, exitScript, &steps)
		id := a.postedReview()
		Expect(kplan(reviewer, "review", a.name, "--raw").OK()).To(Equal("# Fix the flake\n\n1. Add the lock.\n"))
		Expect(kplan(reviewer, "approve", a.name).OK()).To(Equal(`Approved "Fix the flake" (review ` + id + "): the agent leaves plan mode at its next step.\n"))
		Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
		Expect(steps).To(HaveLen(2))
		Expect(steps[0].Active).To(BeTrue())
		Expect(steps[1].Active).To(BeFalse())
		Expect(steps[1].Asked).To(BeTrue())
		Expect(steps[1].Notice).To(BeEmpty())
		Expect(types(a.events())).To(Equal([]string{
			`plan/mode {"active":true}`, "turn/start", "step/start", "user/message", "request/header",
			"tool/call", "tool/result", "step/end", `plan/mode {"active":false}`, "step/start", "request/header", "step/end", "turn/end",
		}))
	})

	It("dismiss: the reference agent concludes its turn and stays in plan mode", func() {
		a := newSession(func(s *agentsv1alpha1.AgentSessionSpec) { s.PlanMode.Active = bp(true) })
		Eventually(func() bool { return a.get().Status.PlanMode.Active }).WithTimeout(20 * time.Second).Should(BeTrue())
		var steps []refagent.StepRecord
		done := runAgent(a, exitScript, &steps)
		a.postedReview()
		kplan(reviewer, "dismiss", a.name).OK()
		Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
		Expect(steps).To(HaveLen(1), "the turn ends at the dismissal; its second step never runs")
		Expect(types(a.events())).To(Equal([]string{
			`plan/mode {"active":true}`, "turn/start", "step/start", "user/message", "request/header",
			"tool/call", "tool/result", "step/end", "turn/end",
		}))
		Expect(a.get().Status.PlanMode.Active).To(BeTrue())
	})
})

var _ = Describe("kubectl plan when the PlanModeConfig in force is missing", func() {
	It("warns, and answers with the entering copy because the manager holds the entry until the config exists", func() {
		a := newSession(func(s *agentsv1alpha1.AgentSessionSpec) {
			s.PlanMode.ConfigRef = &agentsv1alpha1.ConfigReference{Name: "strict"}
		})
		r := kplan(toggler, "on", a.name)
		Expect(r.OK()).To(Equal(onDeferred(a.name)))
		// The toggler cannot read PlanModeConfigs; the manager's Ready condition says it.
		Expect(r.Err).To(Equal("warning: PlanModeConfig \"strict\" not found in namespace \"team-a\": create it or set spec.planMode.configRef.name; entering plan mode waits for it\n"))
		Eventually(func() *bool { return a.get().Status.PlanMode.PendingActive }).Should(Equal(bp(true)))
		Expect(a.get().Status.PlanMode.Active).To(BeFalse())
	})
})
