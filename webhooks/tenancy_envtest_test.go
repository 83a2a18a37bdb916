package webhooks

import (
	"context"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// Tenancy: one log per session, an approval bound to the text read, an agent bound to its own
// session. Every identity is reached through impersonation with the shipped roles bound.
var _ = Describe("AgentSession tenancy", func() {
	ctx := context.Background()

	bindRole := func(ns, role string, subject rbacv1.Subject) {
		GinkgoHelper()
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
		if ns == "" {
			Expect(adminC.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("crb")},
				RoleRef: ref, Subjects: []rbacv1.Subject{subject}})).To(Succeed())
			return
		}
		Expect(adminC.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("rb"), Namespace: ns},
			RoleRef: ref, Subjects: []rbacv1.Subject{subject}})).To(Succeed())
	}
	serviceAccount := func(ns, name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
	}

	It("refuses a second AgentSession naming a spec.sessionID in use, in any namespace, naming the field", func() {
		teamB := "tb-" + uniqueName("u") + "@example.com"
		bindRole(otherNS, "agentsession-editor-role", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: teamB})
		owner := newSession(ctx) // team-a's session; its spec.sessionID is its name
		claim := func(ns, name string) *agentsv1alpha1.AgentSession {
			return &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: agentsv1alpha1.AgentSessionSpec{SessionID: owner.Spec.SessionID, Agent: bindingFor(name)}}
		}
		want := specDenied + `AgentSession.agents.harness.dev "intruder" is invalid: spec.sessionID: Invalid value: "` + owner.Spec.SessionID +
			`": is already the session log of another AgentSession in another namespace: each AgentSession needs a log of its own; choose another spec.sessionID`
		// The webhook lists on the API server: the owner it has just stored is seen at once.
		st := statusOf(as(teamB).Create(ctx, claim(otherNS, "intruder")))
		Expect(st.Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
		Expect(st.Message).To(Equal(want))
		Expect(adminC.Get(ctx, client.ObjectKey{Namespace: otherNS, Name: "intruder"}, &agentsv1alpha1.AgentSession{})).NotTo(Succeed())

		By("in the same namespace the other session is named")
		st = statusOf(adminC.Create(ctx, claim(testNS, "twin")))
		Expect(st.Message).To(ContainSubstring(`spec.sessionID: Invalid value: "` + owner.Spec.SessionID + `": is already the session log of AgentSession "` + owner.Name + `" in this namespace`))
	})

	It("refuses a fork of another namespace's session, and a fork through the last event of the parent's open turn, naming the field", func() {
		parent := newSession(ctx) // in testNS
		fork := func(ns, name string, through *int64) *agentsv1alpha1.AgentSession {
			return &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: agentsv1alpha1.AgentSessionSpec{SessionID: uniqueName("f"), Agent: bindingFor(name),
					Fork: &agentsv1alpha1.ForkSource{SessionID: parent.Spec.SessionID, ThroughSeq: through}}}
		}
		By("a fork from another namespace would copy another tenant's log")
		want := specDenied + `AgentSession.agents.harness.dev "reader" is invalid: spec.fork.sessionID: Forbidden: "` + parent.Spec.SessionID +
			`" is the session log of an AgentSession in another namespace: a fork copies its parent's events, so it may only name a session of namespace "` + otherNS + `"`
		err := adminC.Create(ctx, fork(otherNS, "reader", nil))
		Expect(err).To(HaveOccurred())
		Expect(statusOf(err).Message).To(Equal(want))
		Expect(adminC.Get(ctx, client.ObjectKey{Namespace: otherNS, Name: "reader"}, &agentsv1alpha1.AgentSession{})).NotTo(Succeed())

		By("the parent's status shows an open turn ending at seq 6: a fork through 6 ends inside it")
		Expect(patchStatus(ctx, as(managerUser), parent, func(o *agentsv1alpha1.AgentSession) {
			o.Status.PlanMode.TurnOpen = true
			o.Status.PlanMode.NextSeq = 7
		})).To(Succeed())
		want = specDenied + `AgentSession.agents.harness.dev "inside" is invalid: spec.fork.throughSeq: Invalid value: 6: is the last event of the open turn of session "` +
			parent.Spec.SessionID + `" (AgentSession "` + parent.Name + `", next seq 7), so the fork would end inside that turn: ` +
			`name the seq of a turn/end of the parent, or leave throughSeq unset to fork through its last completed turn`
		err = adminC.Create(ctx, fork(testNS, "inside", new(int64(6))), client.DryRunAll)
		Expect(err).To(HaveOccurred())
		Expect(statusOf(err).Message).To(Equal(want))

		By("an earlier seq the status cannot place, and an unset throughSeq, are left to the manager and the log store")
		Expect(adminC.Create(ctx, fork(testNS, "earlier", new(int64(3))), client.DryRunAll)).To(Succeed())
		Expect(adminC.Create(ctx, fork(testNS, "completed", nil), client.DryRunAll)).To(Succeed())
	})

	It("refuses a decision naming the digest of another text, and a plan changed under its review id", func() {
		s := newSession(ctx)
		const read, swapped = "# The plan read\n\n1. add tests\n", "# SWAPPED plan\n\n1. drop the tests\n"
		Expect(patchStatus(ctx, agentOf(s), s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: "r1", Plan: read, Turn: 1}}
		})).To(Succeed())

		By("the agent cannot swap the plan under the same review id")
		before := get(ctx, s)
		st := statusOf(patchStatus(ctx, agentOf(s), s, func(o *agentsv1alpha1.AgentSession) { o.Status.Agent.Review.Plan = swapped }))
		Expect(st.Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
		Expect(st.Message).To(Equal(statusDenied + `AgentSession.agents.harness.dev "` + s.Name + `" is invalid: status.agent.review.plan: Forbidden: ` +
			`the plan under review "r1" cannot change once posted: post a changed plan under a new review id`))
		Expect(get(ctx, s).ResourceVersion).To(Equal(before.ResourceVersion))

		By("a decision must name the digest of the plan under review, if it names one")
		f := false
		decide := func(digest string) func(*agentsv1alpha1.AgentSession) {
			return func(o *agentsv1alpha1.AgentSession) {
				o.Spec.Review = &agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: agentsv1alpha1.ReviewApprove, PlanSHA256: digest}
				o.Spec.PlanMode.Active = &f
			}
		}
		other := planmode.PlanSHA256(swapped)
		st = statusOf(patchSpec(ctx, as(reviewerUser), s, decide(other)))
		Expect(st.Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
		Expect(st.Message).To(Equal(specDenied + `AgentSession.agents.harness.dev "` + s.Name + `" is invalid: spec.review.planSHA256: Invalid value: "` + other +
			`": is not the digest of the plan under review "r1" (` + planmode.PlanSHA256(read) + `): the plan is not the one read; read it again with kubectl plan review ` + s.Name))
		Expect(get(ctx, s).Spec.Review).To(BeNil())
		Expect(patchSpec(ctx, as(reviewerUser), s, decide(planmode.PlanSHA256(read)))).To(Succeed())
		Expect(get(ctx, s).Spec.Review.PlanSHA256).To(Equal(planmode.PlanSHA256(read)))
	})

	It("lets only the session's bound agent write its status.agent, whatever RBAC binds", func() {
		s := newSession(ctx)
		boundSA := s.Spec.Agent.ServiceAccountName
		bound := "system:serviceaccount:" + testNS + ":" + boundSA
		Expect(patchSpec(ctx, as(editorUser), s, func(o *agentsv1alpha1.AgentSession) {
			o.Spec.SteerQueue = []agentsv1alpha1.SteerMessage{{ID: "m1", Text: "look at the tests first"}}
		})).To(Succeed())

		By("another agent of the namespace, bound to the agent role there, cannot mark the message delivered (and so drop it)")
		before := get(ctx, s)
		st := statusOf(patchStatus(ctx, as(agentUser), s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{SteerID: "m1"}
		}))
		Expect(st.Code).To(BeEquivalentTo(http.StatusForbidden))
		Expect(st.Message).To(Equal(statusDenied + `agentsessions.agents.harness.dev "` + s.Name + `" is forbidden: status.agent: Forbidden: session "` + s.Name +
			`" is bound to its agent's service account "` + boundSA + `" (spec.agent.serviceAccountName): "` + agentUser +
			`" may not write its status.agent; run the agent as that service account, or change spec.agent`))
		Expect(get(ctx, s).ResourceVersion).To(Equal(before.ResourceVersion))

		By("the bound agent records only the id of the message it delivered")
		st = statusOf(patchStatus(ctx, as(bound), s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{SteerID: "m9"}
		}))
		Expect(st.Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
		Expect(st.Message).To(ContainSubstring(`status.agent.steerID: Invalid value: "m9": no message of this session has that id (spec.steerQueue)`))
		Expect(patchStatus(ctx, as(bound), s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{SteerID: "m1"}
		})).To(Succeed())
		Expect(get(ctx, s).Status.Agent.SteerID).To(Equal("m1"))

		By("the bound agent writes no spec")
		st = statusOf(patchSpec(ctx, as(bound), s, func(o *agentsv1alpha1.AgentSession) { o.Spec.Agent = nil }))
		Expect(st.Code).To(BeEquivalentTo(http.StatusForbidden))
	})

	It("refuses status.agent from a service account not named as an agent, even bound cluster-wide to the agent role", func() {
		const ciSA = "ci-bot"
		ci := "system:serviceaccount:" + otherNS + ":" + ciSA
		bindRole("", "agentsession-agent-role", serviceAccount(otherNS, ciSA))
		s := newSession(ctx)
		before := get(ctx, s)
		st := statusOf(patchStatus(ctx, as(ci), s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{Boundary: &agentsv1alpha1.StepBoundary{Turn: 1, Step: 1, Seq: 0}}
		}))
		Expect(st.Code).To(BeEquivalentTo(http.StatusForbidden))
		Expect(st.Message).To(ContainSubstring(`status.agent: Forbidden: session "` + s.Name + `" is bound to its agent's service account "` +
			s.Spec.Agent.ServiceAccountName + `" (spec.agent.serviceAccountName): "` + ci + `" may not write its status.agent`))
		Expect(get(ctx, s).ResourceVersion).To(Equal(before.ResourceVersion))
	})

	It("binds one agent identity to one session by default, naming spec.agent and the fix", func() {
		unbound := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: uniqueName("unbound")}}
		unbound.Spec.SessionID = unbound.Name
		st := statusOf(as(editorUser).Create(ctx, unbound))
		Expect(st.Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
		Expect(st.Message).To(ContainSubstring(`spec.agent: Required value: this operator lets only a session's bound agent write its status.agent: ` +
			`set spec.agent.serviceAccountName to the service account the agent pod runs as`))

		By("a second session naming an agent service account already bound in the namespace is refused")
		first := newSession(ctx)
		sa := first.Spec.Agent.ServiceAccountName
		second := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: uniqueName("second")},
			Spec: agentsv1alpha1.AgentSessionSpec{SessionID: uniqueName("second"), Agent: &agentsv1alpha1.AgentBinding{ServiceAccountName: sa}}}
		st = statusOf(as(editorUser).Create(ctx, second))
		Expect(st.Message).To(ContainSubstring(`spec.agent.serviceAccountName: Invalid value: "` + sa + `": is already the agent of AgentSession "` +
			first.Name + `": an agent identity writes the status of one session only; ` +
			`run this session's agent as a service account of its own (kubectl create serviceaccount planmode-agent-<name>)`))
		second.Spec.Agent = bindingFor(second.Name)
		Expect(as(editorUser).Create(ctx, second)).To(Succeed(), "a service account of its own is accepted")

		By("a binding cannot be dropped, and the bound agent writes no other session's status.agent")
		st = statusOf(patchSpec(ctx, as(editorUser), first, func(o *agentsv1alpha1.AgentSession) { o.Spec.Agent = nil }))
		Expect(st.Message).To(ContainSubstring("spec.agent: Required value"))
		st = statusOf(patchStatus(ctx, agentOf(first), second, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{Boundary: &agentsv1alpha1.StepBoundary{Turn: 1, Step: 1, Seq: 0}}
		}))
		Expect(st.Message).To(ContainSubstring(`status.agent: Forbidden: session "` + second.Name + `" is bound to its agent's service account`))
	})

	It("with --webhook-require-agent-binding=false, warns on every unbound session, and an unbound session stored earlier takes no status.agent under the default", func() {
		// The suite's webhook runs with the default; this validator is one without the
		// requirement, on the same API reader and access checker, called as the webhook
		// server calls it.
		ids := Identities{ManagerUsernames: []string{managerUser}, AgentGroups: []string{DefaultAgentGroup}, AgentServiceAccountPrefix: DefaultAgentServiceAccountPrefix}
		loose := &AgentSessionValidator{RequireAgentBinding: false, Sessions: suiteReader, Access: SubjectAccessReviewer{Client: adminC}, Identities: ids}
		strict := &AgentSessionValidator{RequireAgentBinding: true, Sessions: suiteReader, Access: SubjectAccessReviewer{Client: adminC}, Identities: ids}
		request := func(user string, sub string, groups ...string) context.Context {
			return admission.NewContextWithRequest(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UserInfo: authenticationv1.UserInfo{Username: user, Groups: groups}, SubResource: sub,
			}})
		}
		old := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: uniqueName("legacy")}}
		old.Spec.SessionID = old.Name
		old.Spec.SteerQueue = []agentsv1alpha1.SteerMessage{{ID: "m1", Text: "look at the tests first"}}
		warnings, err := loose.ValidateCreate(request(editorUser, ""), old)
		Expect(err).NotTo(HaveOccurred())
		Expect(warnings).To(ContainElement(ContainSubstring(`spec.agent is unset and this operator runs with --webhook-require-agent-binding=false: ` +
			`any agent identity in namespace "` + testNS + `" may write this session's status.agent`)))
		bound := old.DeepCopy()
		bound.Spec.Agent = bindingFor(old.Name)
		warnings, err = loose.ValidateUpdate(request(editorUser, ""), bound, old)
		Expect(err).NotTo(HaveOccurred())
		Expect(warnings).To(ContainElement(ContainSubstring("spec.agent is unset")), "unbinding is warned about")

		forge := old.DeepCopy()
		forge.Status.Agent = &agentsv1alpha1.AgentReport{SteerID: "m1"}
		By("without the requirement, an agent of the namespace may write an unbound session; an agent of another namespace's group may not")
		_, err = loose.ValidateUpdate(request(agentUser, "status"), old, forge)
		Expect(err).NotTo(HaveOccurred())
		_, err = loose.ValidateUpdate(request(agentGroupUser, "status", DefaultAgentGroup+":"+otherNS), old, forge)
		Expect(err).To(MatchError(ContainSubstring(`is an agent of namespace ` + otherNS + ` and may not write sessions in "` + testNS + `"`)))
		By("under the default, the unbound session keeps its spec (ratcheting) but takes no status.agent: no forged delivery drops its message")
		toggled := old.DeepCopy()
		toggled.Spec.PlanMode.Active = ptr.To(true)
		_, err = strict.ValidateUpdate(request(editorUser, ""), old, toggled)
		Expect(err).NotTo(HaveOccurred())
		_, err = strict.ValidateUpdate(request(agentUser, "status"), old, forge)
		Expect(err).To(MatchError(ContainSubstring(`status.agent: Forbidden: session "` + old.Name +
			`" names no agent (spec.agent) and this operator lets only a session's bound agent write its status.agent: ` +
			`bind it to the agent pod's service account with kubectl patch agentsession ` + old.Name + ` -n ` + testNS +
			` --type merge -p '{"spec":{"agent":{"serviceAccountName":"<service account>"}}}'`)))
	})

	It("fails closed: a validator missing its API reader or access checker refuses what it cannot check", func() {
		bare := &AgentSessionValidator{RequireAgentBinding: true, Identities: Identities{ManagerUsernames: []string{managerUser}}}
		s := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: uniqueName("closed")}}
		s.Spec.SessionID, s.Spec.Agent = s.Name, bindingFor(s.Name)
		req := admission.NewContextWithRequest(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UserInfo: authenticationv1.UserInfo{Username: editorUser}}})
		_, err := bare.ValidateCreate(req, s)
		Expect(err).To(MatchError(ContainSubstring("set up without a reader of AgentSessions")))
		withReader := &AgentSessionValidator{RequireAgentBinding: true, Sessions: suiteReader, Identities: bare.Identities}
		s.Spec.Review = &agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: agentsv1alpha1.ReviewKeepPlanning}
		_, err = withReader.ValidateCreate(req, s)
		Expect(err).To(MatchError(ContainSubstring("set up without an access checker")))
	})

	It("validates spec.reviewTimeout with its field path and the fix; negative and zero are refused", func() {
		create := func(timeout string) error {
			name := uniqueName("rt")
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": agentsv1alpha1.GroupVersion.String(), "kind": "AgentSession",
				"metadata": map[string]any{"name": name, "namespace": testNS},
				"spec":     map[string]any{"sessionID": name, "reviewTimeout": timeout, "agent": map[string]any{"serviceAccountName": bindingFor(name).ServiceAccountName}},
			}}
			return as(editorUser).Create(ctx, u)
		}
		for _, bad := range []string{"forever", "-5s", "0s", "10"} {
			err := create(bad)
			Expect(err).To(HaveOccurred(), bad)
			Expect(err.Error()).To(ContainSubstring("spec.reviewTimeout: Invalid value"), bad)
			Expect(err.Error()).To(ContainSubstring("spec.reviewTimeout must be a positive duration such as 30m or 1h30m"), bad)
			Expect(err.Error()).To(ContainSubstring("remove it to let reviews wait until answered"), bad)
		}
		for _, good := range []string{"90m", "1h30m", "1.5h", "500ms"} {
			Expect(create(good)).To(Succeed(), good)
		}
	})
})
