package webhooks

import (
	"context"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// An approval records the user's wish to leave plan mode in the same write: the manager is
// edge-triggered on spec.planMode.active, so an approval that left it at true would swallow
// the user's next "active: true". The approval that completes a review sets it to false itself
// (the identity stamper, review_stamp.go); the validator backs that up.
var _ = Describe("AgentSession approval leaves plan mode", func() {
	ctx := context.Background()
	const leaveMsg = `spec.planMode.active: Invalid value: true: approving a plan leaves plan mode: set spec.planMode.active to false in the same patch (kubectl plan approve does)`
	const postedPlan = "# Plan\n\n1. read\n"
	t := true

	posted := func(active *bool) *agentsv1alpha1.AgentSession {
		GinkgoHelper()
		s := newSession(ctx)
		if active != nil {
			Expect(patchSpec(ctx, adminC, s, func(o *agentsv1alpha1.AgentSession) { o.Spec.PlanMode.Active = active })).To(Succeed())
		}
		Expect(patchStatus(ctx, agentOf(s), s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: "r1", Plan: postedPlan}}
		})).To(Succeed())
		return s
	}
	decide := func(d agentsv1alpha1.ReviewDecisionType, feedback string) func(*agentsv1alpha1.AgentSession) {
		return func(o *agentsv1alpha1.AgentSession) {
			o.Spec.Review = &agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: d, Feedback: feedback, PlanSHA256: planmode.PlanSHA256(postedPlan)}
		}
	}

	It("sets spec.planMode.active to false in the approving write, stamped with the approver", func() {
		s := posted(&t)
		By("the permission check comes first: a user who may not approve hears that")
		st := statusOf(patchSpec(ctx, as(editorUser), s, decide(agentsv1alpha1.ReviewApprove, "")))
		Expect(st.Code).To(BeEquivalentTo(http.StatusForbidden))
		Expect(st.Message).To(ContainSubstring(`may not decide plan reviews`))

		By("an approval that leaves spec.planMode.active at true is completed by the webhook")
		Expect(patchSpec(ctx, as(reviewerUser), s, decide(agentsv1alpha1.ReviewApprove, ""))).To(Succeed())
		after := get(ctx, s)
		Expect(after.Spec.PlanMode.Active).To(HaveValue(BeFalse()))
		Expect(after.Spec.PlanMode.SelectedBy.Username).To(Equal(reviewerUser))
		Expect(after.Spec.Review.DecidedBy.Username).To(Equal(reviewerUser))
		Expect(after.Spec.Review.DecidedAt).NotTo(BeNil())

		By("a later selection of plan mode is an ordinary spec change, not re-judged with the old approval")
		Expect(patchSpec(ctx, as(editorUser), s, func(o *agentsv1alpha1.AgentSession) { o.Spec.PlanMode.Active = &t })).To(Succeed())
		Expect(get(ctx, s).Spec.PlanMode.Active).To(Equal(&t))
		Expect(get(ctx, s).Spec.PlanMode.SelectedBy.Username).To(Equal(editorUser))
	})

	It("refuses an approval that names no digest, naming the fix, and changes nothing", func() {
		s := posted(&t)
		before := get(ctx, s)
		st := statusOf(patchSpec(ctx, as(reviewerUser), s, func(o *agentsv1alpha1.AgentSession) {
			o.Spec.Review = &agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: agentsv1alpha1.ReviewApprove}
		}))
		Expect(st.Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
		Expect(st.Message).To(ContainSubstring(`spec.review: Forbidden: this decision cannot count: an approval must name the SHA-256 of the plan text it approves (planSHA256)`))
		Expect(st.Message).To(ContainSubstring(`approve with kubectl plan approve, which names it (or set allowApprovalWithoutDigest in the namespace's ReviewPolicy)`))
		Expect(get(ctx, s).Spec).To(Equal(before.Spec))
	})

	It("admits an approval when spec.planMode.active is unset (a fork that inherited plan mode)", func() {
		s := posted(nil)
		Expect(patchSpec(ctx, as(reviewerUser), s, decide(agentsv1alpha1.ReviewApprove, ""))).To(Succeed())
		Expect(get(ctx, s).Spec.PlanMode.Active).To(BeNil())
	})

	It("does not take Approve with feedback (read as keep planning) or other decisions out of plan mode", func() {
		for _, d := range []func(*agentsv1alpha1.AgentSession){decide(agentsv1alpha1.ReviewApprove, "rename it"), decide(agentsv1alpha1.ReviewDismiss, "")} {
			s := posted(&t)
			Expect(patchSpec(ctx, as(reviewerUser), s, d)).To(Succeed())
			Expect(get(ctx, s).Spec.PlanMode.Active).To(Equal(&t))
		}
	})

	It("refuses an approval that selects plan mode at creation", func() {
		s := &agentsv1alpha1.AgentSession{}
		s.Name, s.Namespace = uniqueName("s"), testNS
		s.Spec.SessionID, s.Spec.Agent = s.Name, bindingFor(s.Name)
		s.Spec.PlanMode.Active = &t
		s.Spec.Review = &agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: agentsv1alpha1.ReviewApprove}
		st := statusOf(adminC.Create(ctx, s))
		Expect(st.Message).To(HaveSuffix(leaveMsg))
	})
})
