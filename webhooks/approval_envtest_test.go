package webhooks

import (
	"context"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// An approval records the user's wish to leave plan mode in the same write: the manager is
// edge-triggered on spec.planMode.active, so an approval that left it at true would swallow
// the user's next "active: true".
var _ = Describe("AgentSession approval leaves plan mode", func() {
	ctx := context.Background()
	const leaveMsg = `spec.planMode.active: Invalid value: true: approving a plan leaves plan mode: set spec.planMode.active to false in the same patch (kubectl plan approve does)`
	t, f := true, false

	posted := func(active *bool) *agentsv1alpha1.AgentSession {
		GinkgoHelper()
		s := newSession(ctx)
		if active != nil {
			Expect(patchSpec(ctx, adminC, s, func(o *agentsv1alpha1.AgentSession) { o.Spec.PlanMode.Active = active })).To(Succeed())
		}
		Expect(patchStatus(ctx, agentOf(s), s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: "r1", Plan: "# Plan\n\n1. read\n"}}
		})).To(Succeed())
		return s
	}
	approve := func(active *bool) func(*agentsv1alpha1.AgentSession) {
		return func(o *agentsv1alpha1.AgentSession) {
			o.Spec.Review = &agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: agentsv1alpha1.ReviewApprove}
			o.Spec.PlanMode.Active = active
		}
	}

	It("refuses an approval that leaves spec.planMode.active at true, naming the fix, and changes nothing", func() {
		s := posted(&t)
		before := get(ctx, s)
		st := statusOf(patchSpec(ctx, as(reviewerUser), s, approve(&t)))
		Expect(st.Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
		Expect(st.Message).To(Equal(specDenied + `AgentSession.agents.harness.dev "` + s.Name + `" is invalid: ` + leaveMsg))
		after := get(ctx, s)
		Expect(after.Spec).To(Equal(before.Spec))
		Expect(after.Generation).To(Equal(before.Generation))

		By("the permission check comes first: a user who may not approve hears that")
		st = statusOf(patchSpec(ctx, as(editorUser), s, approve(&t)))
		Expect(st.Code).To(BeEquivalentTo(http.StatusForbidden))
		Expect(st.Message).To(ContainSubstring(`may not decide plan reviews`))

		By("approving and deselecting plan mode in one patch is admitted")
		Expect(patchSpec(ctx, as(reviewerUser), s, approve(&f))).To(Succeed())
		after = get(ctx, s)
		Expect(after.Spec.PlanMode.Active).To(Equal(&f))
		Expect(after.Spec.Review.Decision).To(Equal(agentsv1alpha1.ReviewApprove))

		By("a later selection of plan mode is an ordinary spec change, not re-judged with the old approval")
		Expect(patchSpec(ctx, as(editorUser), s, func(o *agentsv1alpha1.AgentSession) { o.Spec.PlanMode.Active = &t })).To(Succeed())
		Expect(get(ctx, s).Spec.PlanMode.Active).To(Equal(&t))
	})

	It("admits an approval when spec.planMode.active is unset (a fork that inherited plan mode)", func() {
		s := posted(nil)
		Expect(patchSpec(ctx, as(reviewerUser), s, approve(nil))).To(Succeed())
		Expect(get(ctx, s).Spec.PlanMode.Active).To(BeNil())
	})

	It("does not ask Approve with feedback (read as keep planning) or other decisions to leave plan mode", func() {
		s := posted(&t)
		Expect(patchSpec(ctx, as(reviewerUser), s, func(o *agentsv1alpha1.AgentSession) {
			o.Spec.Review = &agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: agentsv1alpha1.ReviewApprove, Feedback: "rename it"}
		})).To(Succeed())
		Expect(patchSpec(ctx, as(reviewerUser), s, func(o *agentsv1alpha1.AgentSession) {
			o.Spec.Review = &agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: agentsv1alpha1.ReviewDismiss}
		})).To(Succeed())
		Expect(get(ctx, s).Spec.PlanMode.Active).To(Equal(&t))
	})

	It("refuses the same at creation", func() {
		s := &agentsv1alpha1.AgentSession{}
		s.Name, s.Namespace = uniqueName("s"), testNS
		s.Spec.SessionID, s.Spec.Agent = s.Name, bindingFor(s.Name)
		approve(&t)(s)
		st := statusOf(adminC.Create(ctx, s))
		Expect(st.Message).To(HaveSuffix(leaveMsg))
	})
})
