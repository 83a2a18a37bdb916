package review_test

import (
	"regexp"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// The plan a reviewer approves is the plan the agent carries out: the agent cannot swap the
// text under the review id, and kubectl plan approve names the digest of the text read.
var _ = Describe("an approval is bound to the plan text read", func() {
	It("refuses the agent's swap under the same review id, and approves the digest the reviewer read", func() {
		a := inPlanMode(nil)
		ch := a.CallExit(plan)
		id := a.postedReview()
		read := kplan(reviewer, "review", a.name).OK()
		m := regexp.MustCompile(`(?m)^SHA-256:\s+([0-9a-f]{64})$`).FindStringSubmatch(read)
		Expect(m).NotTo(BeNil(), "kubectl plan review prints the plan's SHA-256:\n%s", read)
		digest := m[1]
		Expect(digest).To(Equal(planmode.PlanSHA256(plan)))

		By("the agent's service account replaces the plan under the same review id: refused, nothing changes")
		before := a.get().ResourceVersion
		run(agentUser, "patch", "agentsession", a.name, "--subresource=status", "--type=merge",
			"-p", `{"status":{"agent":{"review":{"plan":"# SWAPPED plan\n\n1. drop the tests\n"}}}}`).
			Refused(`status.agent.review.plan: Forbidden: the plan under review "` + id + `" cannot change once posted: post a changed plan under a new review id`)
		Expect(a.get().ResourceVersion).To(Equal(before))

		By("a digest of another text is refused by the plugin before anything is written")
		kplan(reviewer, "approve", a.name, "--review-id", id, "--plan-sha256", planmode.PlanSHA256("# SWAPPED plan\n")).
			Fails(`is not the text you read: its SHA-256 is ` + digest)
		Expect(a.get().Spec.ReviewVotes).To(BeEmpty())

		By("plain kubectl with a digest of another text is refused by the webhook")
		run(reviewer, "patch", "agentsession", a.name, "--type=merge", "-p",
			`{"spec":{"review":{"reviewID":"`+id+`","decision":"Approve","planSHA256":"`+planmode.PlanSHA256("# SWAPPED plan\n")+`"},"planMode":{"active":false}}}`).
			Refused(`spec.review.planSHA256: Invalid value`, `is not the digest of the plan under review "`+id+`"`)
		Expect(a.get().Spec.ReviewVotes).To(BeEmpty())

		By("the reviewer approves the text read")
		Expect(kplan(reviewer, "approve", a.name, "--review-id", id, "--plan-sha256", digest).OK()).
			To(Equal(`Approved "Fix the flake" (review ` + id + "): the agent leaves plan mode at its next step.\n"))
		e := receive(ch)
		Expect(e.Err).NotTo(HaveOccurred())
		Expect(e.Result.Text).To(Equal(harness.ExitApprovedText))
		as := a.get()
		Expect(as.Spec.ReviewVotes).To(HaveLen(1))
		Expect(as.Spec.ReviewVotes[0].PlanSHA256).To(Equal(digest))
		Expect(as.Spec.ReviewVotes[0].DecidedBy.Username).To(Equal(reviewer), "stamped from the request")
		Expect(as.Status.Review.Phase).To(Equal(agentsv1alpha1.ReviewApproved))
		Expect(as.Status.Review.PlanSHA256).To(Equal(digest), "the manager records the text it opened the review with")
	})
})
