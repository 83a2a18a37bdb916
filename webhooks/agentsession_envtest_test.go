package webhooks

import (
	"context"
	"fmt"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

const (
	statusDenied = `admission webhook "vagentsession-status-v1alpha1.agents.harness.dev" denied the request: `
	specDenied   = `admission webhook "vagentsession-v1alpha1.agents.harness.dev" denied the request: `
)

func ownerMsg(user string) string {
	return fmt.Sprintf("only the manager (%s) may change this field; %q may change only status.agent", managerUser, user)
}

// newSession creates a session of testNS bound, as the suite's webhook requires (the default),
// to an agent service account of its own, which agentOf impersonates.
func newSession(ctx context.Context) *agentsv1alpha1.AgentSession {
	GinkgoHelper()
	name := uniqueName("s")
	s := &agentsv1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: name, Agent: bindingFor(name)},
	}
	Expect(adminC.Create(ctx, s)).To(Succeed())
	return s
}

// bindingFor is the spec.agent of session name: a service account of its own.
func bindingFor(name string) *agentsv1alpha1.AgentBinding {
	return &agentsv1alpha1.AgentBinding{ServiceAccountName: DefaultAgentServiceAccountPrefix + "-" + name}
}

// agentOf is a client of s's bound agent (its service account, impersonated).
func agentOf(s *agentsv1alpha1.AgentSession) client.Client {
	return as(serviceAccountUsername(s.Namespace, s.Spec.Agent.ServiceAccountName))
}

func get(ctx context.Context, s *agentsv1alpha1.AgentSession) *agentsv1alpha1.AgentSession {
	GinkgoHelper()
	got := &agentsv1alpha1.AgentSession{}
	Expect(adminC.Get(ctx, client.ObjectKeyFromObject(s), got)).To(Succeed())
	return got
}

// patchStatus merge-patches the status subresource as c, after mutate.
func patchStatus(ctx context.Context, c client.Client, s *agentsv1alpha1.AgentSession, mutate func(*agentsv1alpha1.AgentSession)) error {
	cur := get(ctx, s)
	orig := cur.DeepCopy()
	mutate(cur)
	return c.Status().Patch(ctx, cur, client.MergeFrom(orig))
}

func patchSpec(ctx context.Context, c client.Client, s *agentsv1alpha1.AgentSession, mutate func(*agentsv1alpha1.AgentSession)) error {
	cur := get(ctx, s)
	orig := cur.DeepCopy()
	mutate(cur)
	return c.Patch(ctx, cur, client.MergeFrom(orig))
}

func expectRBACForbidden(err error, verb string) {
	GinkgoHelper()
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want an RBAC 403, got %v", err)
	Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("cannot %s resource", verb)))
}

var _ = Describe("AgentSession status ownership", func() {
	ctx := context.Background()

	It("lets the manager write status.planMode, conditions, review and observedGeneration", func() {
		s := newSession(ctx)
		Expect(patchStatus(ctx, as(managerUser), s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.PlanMode.Active = true
			o.Status.PlanMode.NextSeq = 7
			o.Status.ObservedGeneration = o.Generation
			o.Status.Review = &agentsv1alpha1.ReviewStatus{ID: "r1", Phase: agentsv1alpha1.ReviewPending}
			o.Status.Conditions = []metav1.Condition{{Type: agentsv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
				Reason: agentsv1alpha1.ReasonInSync, Message: "in sync", LastTransitionTime: metav1.Now(), ObservedGeneration: o.Generation}}
		})).To(Succeed())
		got := get(ctx, s)
		Expect(got.Status.PlanMode.Active).To(BeTrue())
		Expect(got.Status.PlanMode.NextSeq).To(BeEquivalentTo(7))
		Expect(got.Status.Conditions).To(HaveLen(1))
	})

	It("lets the agent write status.agent and nothing else in status", func() {
		s := newSession(ctx)
		agent := agentOf(s)
		agentName := serviceAccountUsername(testNS, s.Spec.Agent.ServiceAccountName)
		Expect(patchStatus(ctx, agent, s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{Boundary: &agentsv1alpha1.StepBoundary{Turn: 1, Step: 1, Seq: 4}}
		})).To(Succeed())
		Expect(get(ctx, s).Status.Agent.Boundary.Seq).To(BeEquivalentTo(4))

		before := get(ctx, s)
		err := patchStatus(ctx, agent, s, func(o *agentsv1alpha1.AgentSession) { o.Status.PlanMode.Active = true })
		st := statusOf(err)
		Expect(st.Code).To(BeEquivalentTo(http.StatusForbidden))
		Expect(st.Reason).To(Equal(metav1.StatusReasonForbidden))
		Expect(st.Message).To(Equal(statusDenied + `agentsessions.agents.harness.dev "` + s.Name + `" is forbidden: status.planMode: Forbidden: ` + ownerMsg(agentName)))
		after := get(ctx, s)
		Expect(after.Status.PlanMode.Active).To(BeFalse(), "a forged committed state must not be stored")
		Expect(after.ResourceVersion).To(Equal(before.ResourceVersion))

		// Several manager-owned fields at once: every one is named.
		err = patchStatus(ctx, agent, s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.ObservedGeneration = 9
			o.Status.Review = &agentsv1alpha1.ReviewStatus{ID: "r1", Phase: agentsv1alpha1.ReviewApproved}
			o.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Forged", LastTransitionTime: metav1.Now()}}
			o.Status.Agent.Boundary.Step = 2 // allowed on its own, refused with the rest
		})
		st = statusOf(err)
		Expect(st.Message).To(Equal(statusDenied + `agentsessions.agents.harness.dev "` + s.Name + `" is forbidden: [` +
			`status.review: Forbidden: ` + ownerMsg(agentName) + `, ` +
			`status.conditions: Forbidden: ` + ownerMsg(agentName) + `, ` +
			`status.observedGeneration: Forbidden: ` + ownerMsg(agentName) + `]`))
		Expect(get(ctx, s).ResourceVersion).To(Equal(before.ResourceVersion))
	})

	It("keeps the agent out of spec: by RBAC for the agent service account, by the webhook for a group member with edit rights", func() {
		s := newSession(ctx)
		err := patchSpec(ctx, agentOf(s), s, func(o *agentsv1alpha1.AgentSession) { o.Spec.PlanMode.Active = ptr.To(false) })
		expectRBACForbidden(err, "patch")

		bot := as(agentGroupUser, DefaultAgentGroup, "system:authenticated")
		err = patchSpec(ctx, bot, s, func(o *agentsv1alpha1.AgentSession) { o.Spec.PlanMode.Active = ptr.To(false) })
		st := statusOf(err)
		Expect(st.Code).To(BeEquivalentTo(http.StatusForbidden))
		Expect(st.Message).To(Equal(specDenied + `agentsessions.agents.harness.dev "` + s.Name + `" is forbidden: spec: Forbidden: agent identity "` +
			agentGroupUser + `" may not create sessions or change spec: an agent writes only status.agent (the status subresource)`))
		Expect(get(ctx, s).Spec.PlanMode.Active).To(BeNil())

		name := uniqueName("bot")
		err = bot.Create(ctx, &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
			Spec: agentsv1alpha1.AgentSessionSpec{SessionID: "x", Agent: bindingFor(name)}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("may not create sessions or change spec"))

		By("so is a member of a namespace's agent group")
		nsBot := as(agentGroupUser, DefaultAgentGroup+":"+testNS, "system:authenticated")
		err = patchSpec(ctx, nsBot, s, func(o *agentsv1alpha1.AgentSession) { o.Spec.PlanMode.Active = ptr.To(false) })
		Expect(statusOf(err).Message).To(ContainSubstring("may not create sessions or change spec"))
	})

	It("refuses an agent service account of another namespace even where RBAC lets it in", func() {
		s := newSession(ctx)
		err := patchStatus(ctx, as(foreignUser), s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{SteerID: "x"}
		})
		st := statusOf(err)
		Expect(st.Message).To(Equal(statusDenied + `agentsessions.agents.harness.dev "` + s.Name + `" is forbidden: status: Forbidden: agent identity "` +
			foreignUser + `" is an agent of namespace ` + otherNS + ` and may not write sessions in "` + testNS + `"`))
		Expect(get(ctx, s).Status.Agent).To(BeNil())
	})

	It("confines agent-group members to the namespace their group names: a bare group member is an agent of none", func() {
		s := newSession(ctx)
		report := func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{Boundary: &agentsv1alpha1.StepBoundary{Turn: 1, Step: 1, Seq: 0}}
		}
		// In system:masters, so RBAC lets each through and the webhook's rule is what is checked.
		st := statusOf(patchStatus(ctx, as(agentGroupUser, DefaultAgentGroup, "system:masters"), s, report))
		Expect(st.Code).To(BeEquivalentTo(http.StatusForbidden))
		Expect(st.Message).To(ContainSubstring(`"` + agentGroupUser + `" is a member of the agent group, which makes it an agent of no namespace: ` +
			`add it to the group ` + DefaultAgentGroup + `:` + testNS + ` to make it an agent of namespace "` + testNS + `" only`))
		st = statusOf(patchStatus(ctx, as(agentGroupUser, DefaultAgentGroup+":"+otherNS, "system:masters"), s, report))
		Expect(st.Message).To(ContainSubstring(`is an agent of namespace ` + otherNS + ` and may not write sessions in "` + testNS + `"`))
		By("a member of this namespace's group is an agent here, and the binding still keeps it off a bound session")
		st = statusOf(patchStatus(ctx, as(agentGroupUser, DefaultAgentGroup+":"+testNS, "system:masters"), s, report))
		Expect(st.Message).To(ContainSubstring(`is bound to its agent's service account`))
		Expect(get(ctx, s).Status.Agent).To(BeNil())
	})

	It("lets a viewer read and nothing else", func() {
		s := newSession(ctx)
		viewer := as(viewerUser)
		Expect(viewer.Get(ctx, client.ObjectKeyFromObject(s), &agentsv1alpha1.AgentSession{})).To(Succeed())
		Expect(viewer.List(ctx, &agentsv1alpha1.PlanModeConfigList{}, client.InNamespace(testNS))).To(Succeed())
		expectRBACForbidden(patchSpec(ctx, viewer, s, func(o *agentsv1alpha1.AgentSession) { o.Spec.PlanMode.Active = ptr.To(true) }), "patch")
		expectRBACForbidden(patchStatus(ctx, viewer, s, func(o *agentsv1alpha1.AgentSession) { o.Status.PlanMode.Active = true }), "patch")
		expectRBACForbidden(patchStatus(ctx, viewer, s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{SteerID: "x"}
		}), "patch")
		expectRBACForbidden(viewer.Delete(ctx, s), "delete")
		expectRBACForbidden(viewer.Create(ctx, &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("v"), Namespace: testNS},
			Spec: agentsv1alpha1.AgentSessionSpec{SessionID: "v"}}), "create")
		expectRBACForbidden(viewer.Create(ctx, pmcObject(uniqueName("v"), `{"section":"x"}`)), "create")
		cfgName := uniqueName("viewed")
		Expect(adminC.Create(ctx, pmcObject(cfgName, `{"section":"Plan first."}`))).To(Succeed())
		pmc := &agentsv1alpha1.PlanModeConfig{}
		Expect(viewer.Get(ctx, client.ObjectKey{Namespace: testNS, Name: cfgName}, pmc)).To(Succeed())
		expectRBACForbidden(viewer.Patch(ctx, pmc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"section":"Write freely."}}`))), "patch")
		expectRBACForbidden(viewer.Delete(ctx, pmc), "delete")
		Expect(viewer.Get(ctx, client.ObjectKey{Namespace: testNS, Name: cfgName}, pmc)).To(Succeed())
		Expect(pmc.Spec.Section).To(Equal("Plan first."))
		got := get(ctx, s)
		Expect(got.Spec.PlanMode.Active).To(BeNil())
		Expect(got.Status.PlanMode.Active).To(BeFalse())
	})

	It("lets an editor toggle plan mode but not write status", func() {
		s := newSession(ctx)
		editor := as(editorUser)
		Expect(patchSpec(ctx, editor, s, func(o *agentsv1alpha1.AgentSession) { o.Spec.PlanMode.Active = ptr.To(true) })).To(Succeed())
		Expect(*get(ctx, s).Spec.PlanMode.Active).To(BeTrue())
		expectRBACForbidden(patchStatus(ctx, editor, s, func(o *agentsv1alpha1.AgentSession) { o.Status.PlanMode.Active = true }), "patch")
	})

	It("refuses status.planMode from any identity but the manager, cluster admins included", func() {
		s := newSession(ctx)
		err := patchStatus(ctx, adminC, s, func(o *agentsv1alpha1.AgentSession) { o.Status.PlanMode.Pending = true })
		st := statusOf(err)
		Expect(st.Message).To(HavePrefix(statusDenied + `agentsessions.agents.harness.dev "` + s.Name + `" is forbidden: status.planMode: Forbidden: only the manager`))
		Expect(get(ctx, s).Status.PlanMode.Pending).To(BeFalse())
	})
})

var _ = Describe("AgentSession spec checks", func() {
	ctx := context.Background()

	It("requires configRef to name a valid object", func() {
		name := uniqueName("cfg")
		err := adminC.Create(ctx, &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
			Spec: agentsv1alpha1.AgentSessionSpec{SessionID: name, Agent: bindingFor(name), PlanMode: agentsv1alpha1.PlanModeSpec{
				ConfigRef: &agentsv1alpha1.ConfigReference{Name: "Team_Plan"}}}})
		st := statusOf(err)
		Expect(st.Reason).To(Equal(metav1.StatusReasonInvalid))
		Expect(st.Message).To(Equal(specDenied + `AgentSession.agents.harness.dev "` + name + `" is invalid: spec.planMode.configRef.name: Invalid value: "Team_Plan": ` +
			`must name a PlanModeConfig, so it must be a valid object name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', ` +
			`and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`))
		Expect(apierrors.IsNotFound(adminC.Get(ctx, client.ObjectKey{Namespace: testNS, Name: name}, &agentsv1alpha1.AgentSession{}))).To(BeTrue())

		s := newSession(ctx)
		err = patchSpec(ctx, adminC, s, func(o *agentsv1alpha1.AgentSession) {
			o.Spec.PlanMode.ConfigRef = &agentsv1alpha1.ConfigReference{Name: "team.plan-v2"}
		})
		Expect(err).NotTo(HaveOccurred())
	})

	It("admits a review decision only from a reviewer, only for the plan under review, and never re-decides a closed one", func() {
		s := newSession(ctx)
		decide := func(o *agentsv1alpha1.AgentSession, id string, d agentsv1alpha1.ReviewDecisionType) {
			o.Spec.Review = &agentsv1alpha1.ReviewDecision{ReviewID: id, Decision: d}
		}
		// No plan posted yet.
		err := patchSpec(ctx, as(reviewerUser), s, func(o *agentsv1alpha1.AgentSession) { decide(o, "r1", agentsv1alpha1.ReviewApprove) })
		st := statusOf(err)
		Expect(st.Message).To(Equal(specDenied + `AgentSession.agents.harness.dev "` + s.Name + `" is invalid: spec.review.reviewID: Invalid value: "r1": ` +
			`no plan is under review (status.agent.review is empty): a decision must quote the id of a posted plan`))

		Expect(patchStatus(ctx, agentOf(s), s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: "r2", Plan: "# Plan\n\n1. read\n"}}
		})).To(Succeed())

		// An editor may toggle plan mode, but not decide reviews.
		err = patchSpec(ctx, as(editorUser), s, func(o *agentsv1alpha1.AgentSession) { decide(o, "r2", agentsv1alpha1.ReviewApprove) })
		st = statusOf(err)
		Expect(st.Code).To(BeEquivalentTo(http.StatusForbidden))
		Expect(st.Message).To(Equal(specDenied + `agentsessions.agents.harness.dev "` + s.Name + `" is forbidden: spec.review: Forbidden: user "` + editorUser +
			`" may not decide plan reviews: deciding needs verb "approve" on agentsessions/review (bind the planmode reviewer role)`))

		// A stale review id.
		err = patchSpec(ctx, as(reviewerUser), s, func(o *agentsv1alpha1.AgentSession) { decide(o, "r1", agentsv1alpha1.ReviewApprove) })
		st = statusOf(err)
		Expect(st.Message).To(Equal(specDenied + `AgentSession.agents.harness.dev "` + s.Name + `" is invalid: spec.review.reviewID: Invalid value: "r1": ` +
			`the plan under review is "r2" (status.agent.review.id): a decision must quote that id`))
		Expect(get(ctx, s).Spec.Review).To(BeNil())

		Expect(patchSpec(ctx, as(reviewerUser), s, func(o *agentsv1alpha1.AgentSession) { decide(o, "r2", agentsv1alpha1.ReviewKeepPlanning) })).To(Succeed())
		Expect(get(ctx, s).Spec.Review.Decision).To(Equal(agentsv1alpha1.ReviewKeepPlanning))

		// The manager closes the review; the decision is then final.
		Expect(patchStatus(ctx, as(managerUser), s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Review = &agentsv1alpha1.ReviewStatus{ID: "r2", Phase: agentsv1alpha1.ReviewKeptPlanning}
		})).To(Succeed())
		err = patchSpec(ctx, as(reviewerUser), s, func(o *agentsv1alpha1.AgentSession) { decide(o, "r2", agentsv1alpha1.ReviewApprove) })
		st = statusOf(err)
		Expect(st.Message).To(Equal(specDenied + `AgentSession.agents.harness.dev "` + s.Name + `" is invalid: spec.review: Forbidden: ` +
			`review "r2" is already closed (KeepPlanning): a decision cannot be changed once the manager has acted on it`))
		Expect(get(ctx, s).Spec.Review.Decision).To(Equal(agentsv1alpha1.ReviewKeepPlanning))
	})

	It("uses each message id once for the session's life: a delivered id is refused at or before it, and when reused later", func() {
		s := newSession(ctx)
		editor := as(editorUser)
		queue := func(ms ...agentsv1alpha1.SteerMessage) func(*agentsv1alpha1.AgentSession) {
			return func(o *agentsv1alpha1.AgentSession) { o.Spec.SteerQueue = ms }
		}
		msg := func(id, text string) agentsv1alpha1.SteerMessage {
			return agentsv1alpha1.SteerMessage{ID: id, Text: text}
		}
		refused := func(err error, index int, id, why string) {
			GinkgoHelper()
			st := statusOf(err)
			Expect(st.Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
			Expect(st.Message).To(ContainSubstring(fmt.Sprintf(`spec.steerQueue[%d].id: Invalid value: "%s": %s`, index, id, why)))
		}
		deliver := func(id string) {
			GinkgoHelper()
			Expect(patchStatus(ctx, agentOf(s), s, func(o *agentsv1alpha1.AgentSession) {
				o.Status.Agent = &agentsv1alpha1.AgentReport{SteerID: id}
			})).To(Succeed())
		}
		Expect(patchSpec(ctx, editor, s, queue(msg("m1", "look at the tests first")))).To(Succeed())
		refused(patchSpec(ctx, editor, s, queue(msg("m1", "look at the docs first"))), 0, "m1", "this message changed but its id did not")
		deliver("m1")

		By("an id at the last delivered one, or before it, would be taken for delivered")
		refused(patchSpec(ctx, editor, s, queue(msg("m1", "again"))), 0, "m1", "this message changed but its id did not")
		refused(patchSpec(ctx, editor, s, queue(msg("m0", "earlier"))), 0, "m0", `must sort after "m1", the last id this session has used`)
		Expect(patchSpec(ctx, editor, s, queue(msg("m2", "look at the docs first")))).To(Succeed())
		deliver("m2")
		Expect(patchSpec(ctx, editor, s, queue())).To(Succeed(), "the writer drops the delivered messages")

		By("reused later, once no message of the queue names it any more")
		refused(patchSpec(ctx, editor, s, queue(msg("m2", "once more"))), 0, "m2", `must sort after "m2"`)
		refused(patchSpec(ctx, editor, s, queue(msg("m1", "once more"))), 0, "m1", `must sort after "m2"`)
		Expect(patchSpec(ctx, editor, s, queue(msg("m10", "numbers compare by value")))).To(Succeed())

		By("a new message may not come before one already queued")
		refused(patchSpec(ctx, editor, s, queue(msg("m11", "cut in"), msg("m10", "numbers compare by value"))), 0, "m11", "a new message must come after the messages already queued")
		refused(patchSpec(ctx, editor, s, queue(msg("m10", "numbers compare by value"), msg("bad id!", "x"))), 1, "bad id!", idFormatMsg)
		Expect(get(ctx, s).Spec.SteerQueue).To(Equal([]agentsv1alpha1.SteerMessage{msg("m10", "numbers compare by value")}))
		Expect(get(ctx, s).Status.Agent.SteerID).To(Equal("m2"))
	})
})

var _ = Describe("manager identity for a local run", func() {
	It("is learned from the API server when no username is configured and no namespace is known", func() {
		if ns := ManagerNamespace(); ns != "" {
			Fail("this spec needs no POD_NAMESPACE and no in-cluster service account; found namespace " + ns)
		}
		ids, err := DefaultOptions().identities(cfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(ids.ManagerUsernames).To(HaveLen(1))
		Expect(ids.ManagerUsernames[0]).NotTo(BeEmpty())
		Expect(ids.ManagerUsernames[0]).NotTo(Equal("system:anonymous"))
		GinkgoWriter.Println("local manager identity:", ids.ManagerUsernames[0])
	})
})
