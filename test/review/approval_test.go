package review_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// The manager is edge-triggered on spec.planMode.active, so an approval records the user's wish
// to leave plan mode in the same write (the webhook's identity stamper sets it in the write that
// completes the approval).
// Otherwise spec would still say true after the approved exit, and a later plain
// `kubectl patch ... active: true` would change nothing: the selection would be lost.

const noDigestMsg = "spec.review: Forbidden: this decision cannot count: an approval must name the SHA-256 of the plan text it approves (planSHA256)"

// planModes are the plan/mode events of the log, as types() prints them.
func planModes(evs []harness.Event) []string {
	var out []string
	for _, t := range types(evs) {
		if strings.HasPrefix(t, harness.TypePlanMode) {
			out = append(out, t)
		}
	}
	return out
}

func patchActive(user, name string, active bool) framework.CmdResult {
	GinkgoHelper()
	return run(user, "patch", "agentsession", name, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"planMode":{"active":%v}}}`, active))
}

var _ = Describe("approving a plan deselects plan mode, so plain kubectl can select it again", func() {
	It("approve: one silent plan/mode{false} at the next boundary, spec and selection false; then a plain patch of active:true enters plan mode again", func() {
		a := inPlanMode(nil)
		ch := a.CallExit(plan)
		id := a.postedReview()

		By("a raw approval that names no digest is refused and changes nothing")
		before := a.get()
		run(reviewer, "patch", "agentsession", a.name, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"review":{"reviewID":%q,"decision":"Approve"}}}`, id)).
			Refused(noDigestMsg)
		after := a.get()
		Expect(after.Generation).To(Equal(before.Generation))
		Expect(after.Spec.Review).To(BeNil())
		Expect(after.Spec.PlanMode.Active).To(Equal(bp(true)))
		Consistently(ch).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "no decision, no answer")

		By("kubectl plan approve appends the vote; the webhook deselects plan mode in the same write")
		Expect(kplan(reviewer, "approve", a.name).OK()).To(Equal(`Approved "Fix the flake" (review ` + id + "): the agent leaves plan mode at its next step.\n"))
		e := receive(ch)
		Expect(e.Err).NotTo(HaveOccurred())
		Expect(e.Result.Approved).To(BeTrue())
		as := a.get()
		Expect(as.Spec.PlanMode.Active).To(Equal(bp(false)))
		Expect(as.Status.ObservedGeneration).To(Equal(as.Generation))
		Expect(as.Status.PlanMode.Selection).To(Equal(bp(false)), "the deselection is taken on")
		Expect(as.Status.PlanMode.PendingActive).To(Equal(bp(false)))
		Expect(as.Status.PlanMode.PendingSource).To(Equal(agentsv1alpha1.PendingSourceExit), "the approved exit, not a user selection")
		Expect(as.Status.PlanMode.Notice).To(BeNil())

		By("the next boundary appends exactly one plan/mode{false}, with no notice")
		r := a.NextStep()
		Expect(r.Active).To(BeFalse())
		Expect(r.Notice).To(BeEmpty(), "an approved exit is never narrated")
		evs := a.events()
		Expect(planModes(evs)).To(Equal([]string{`plan/mode {"active":true}`, `plan/mode {"active":false}`}))
		Expect(types(evs[len(evs)-3:])).To(Equal([]string{`plan/mode {"active":false}`, "step/start", "request/header"}))
		Expect(kplan(viewer, "log", a.name, "--store", storeURL).OK()).NotTo(ContainSubstring("notice"))

		By("plain kubectl, no plugin: active:true during the turn is a new selection, queued for the next step")
		patchActive(toggler, a.name, true).OK()
		Eventually(func(g Gomega) {
			as := a.get()
			g.Expect(as.Status.ObservedGeneration).To(Equal(as.Generation))
			g.Expect(as.Status.PlanMode.Selection).To(Equal(bp(true)))
			g.Expect(as.Status.PlanMode.PendingActive).To(Equal(bp(true)))
			g.Expect(as.Status.PlanMode.PendingSource).To(Equal(agentsv1alpha1.PendingSourceUser))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		r = a.NextStep()
		Expect(r.Active).To(BeTrue(), "plan mode entered again")
		Expect(r.Notice).To(Equal(harness.NoticePlanOn))
		a.EndTurn()
		Expect(planModes(a.events())).To(Equal([]string{`plan/mode {"active":true}`, `plan/mode {"active":false}`, `plan/mode {"active":true}`}))
	})

	It("approve between turns: the exit is committed silently (no narrated selection), and active:true commits plan mode again", func() {
		By("a turn in plan mode tells the model plan mode is on, then ends")
		a := inPlanMode(nil)
		a.EndTurn()
		By("a plan is under review while no turn is open (posted as the agent's service account)")
		agentC, err := client.New(impersonate(agentUser), client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		body := `{"status":{"agent":{"review":{"id":"r-idle","plan":"# Idle plan\n","turn":0}}}}`
		Expect(agentC.Status().Patch(ctx, a.get(), client.RawPatch(k8stypes.MergePatchType, []byte(body)))).To(Succeed())
		Expect(a.postedReview()).To(Equal("r-idle"))

		Expect(kplan(reviewer, "approve", a.name).OK()).To(Equal(`Approved "Idle plan" (review r-idle): the agent leaves plan mode at its next step.` + "\n"))
		Eventually(func(g Gomega) {
			as := a.get()
			g.Expect(as.Status.Review.Phase).To(Equal(agentsv1alpha1.ReviewApproved))
			g.Expect(as.Status.PlanMode.Active).To(BeFalse())
			g.Expect(as.Status.PlanMode.PendingActive).To(BeNil())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		as := a.get()
		Expect(as.Status.PlanMode.Selection).To(Equal(bp(false)))
		Expect(as.Status.PlanMode.Notice).To(BeNil(), "the approved exit owes no notice")
		Expect(planModes(a.events())).To(Equal([]string{`plan/mode {"active":true}`, `plan/mode {"active":false}`}))

		By("the next turn's first step carries no notice")
		a.StartTurn()
		r := a.NextStep("go")
		Expect(r.Active).To(BeFalse())
		Expect(r.Notice).To(BeEmpty())
		a.EndTurn()

		By("plain kubectl, no plugin: active:true between turns commits plan mode at once")
		patchActive(toggler, a.name, true).OK()
		Eventually(func() bool { return a.get().Status.PlanMode.Active }).WithTimeout(10 * time.Second).Should(BeTrue())
		Expect(a.get().Status.PlanMode.Selection).To(Equal(bp(true)))
		evs := a.events()
		Expect(planModes(evs)).To(Equal([]string{`plan/mode {"active":true}`, `plan/mode {"active":false}`, `plan/mode {"active":true}`}))
		Expect(types(evs[len(evs)-1:])).To(Equal([]string{`plan/mode {"active":true}`}))
		Expect(a.get().Status.PlanMode.Notice).To(HaveField("Text", harness.NoticePlanOn))
	})
})
