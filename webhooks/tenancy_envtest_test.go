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
				Spec: agentsv1alpha1.AgentSessionSpec{SessionID: owner.Spec.SessionID}}
		}
		want := specDenied + `AgentSession.agents.harness.dev "intruder" is invalid: spec.sessionID: Invalid value: "` + owner.Spec.SessionID +
			`": is already the session log of another AgentSession in another namespace: each AgentSession needs a log of its own; choose another spec.sessionID`
		// The webhook answers from the manager's cache: a dry run (admission runs, nothing is
		// stored) shows when it has seen the owner.
		Eventually(func(g Gomega) {
			err := as(teamB).Create(ctx, claim(otherNS, "intruder"), client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(statusOf(err).Message).To(Equal(want))
		}).Should(Succeed())
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
				Spec: agentsv1alpha1.AgentSessionSpec{SessionID: uniqueName("f"), Fork: &agentsv1alpha1.ForkSource{SessionID: parent.Spec.SessionID, ThroughSeq: through}}}
		}
		By("a fork from another namespace would copy another tenant's log")
		want := specDenied + `AgentSession.agents.harness.dev "reader" is invalid: spec.fork.sessionID: Forbidden: "` + parent.Spec.SessionID +
			`" is the session log of an AgentSession in another namespace: a fork copies its parent's events, so it may only name a session of namespace "` + otherNS + `"`
		Eventually(func(g Gomega) {
			err := adminC.Create(ctx, fork(otherNS, "reader", nil), client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(statusOf(err).Message).To(Equal(want))
		}).Should(Succeed())
		Expect(adminC.Get(ctx, client.ObjectKey{Namespace: otherNS, Name: "reader"}, &agentsv1alpha1.AgentSession{})).NotTo(Succeed())

		By("the parent's status shows an open turn ending at seq 6: a fork through 6 ends inside it")
		Expect(patchStatus(ctx, as(managerUser), parent, func(o *agentsv1alpha1.AgentSession) {
			o.Status.PlanMode.TurnOpen = true
			o.Status.PlanMode.NextSeq = 7
		})).To(Succeed())
		want = specDenied + `AgentSession.agents.harness.dev "inside" is invalid: spec.fork.throughSeq: Invalid value: 6: is the last event of the open turn of session "` +
			parent.Spec.SessionID + `" (AgentSession "` + parent.Name + `", next seq 7), so the fork would end inside that turn: ` +
			`name the seq of a turn/end of the parent, or leave throughSeq unset to fork through its last completed turn`
		Eventually(func(g Gomega) {
			err := adminC.Create(ctx, fork(testNS, "inside", new(int64(6))), client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(statusOf(err).Message).To(Equal(want))
		}).Should(Succeed())

		By("an earlier seq the status cannot place, and an unset throughSeq, are left to the manager")
		Expect(adminC.Create(ctx, fork(testNS, "earlier", new(int64(3))), client.DryRunAll)).To(Succeed())
		Expect(adminC.Create(ctx, fork(testNS, "completed", nil), client.DryRunAll)).To(Succeed())
	})

	It("refuses a decision naming the digest of another text, and a plan changed under its review id", func() {
		s := newSession(ctx)
		const read, swapped = "# The plan read\n\n1. add tests\n", "# SWAPPED plan\n\n1. drop the tests\n"
		Expect(patchStatus(ctx, as(agentUser), s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: "r1", Plan: read, Turn: 1}}
		})).To(Succeed())

		By("the agent cannot swap the plan under the same review id")
		before := get(ctx, s)
		st := statusOf(patchStatus(ctx, as(agentUser), s, func(o *agentsv1alpha1.AgentSession) { o.Status.Agent.Review.Plan = swapped }))
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
		const boundSA = "planmode-agent-a"
		bound := "system:serviceaccount:" + testNS + ":" + boundSA
		bindRole(testNS, "agentsession-agent-role", serviceAccount(testNS, boundSA))
		s := newSession(ctx)
		Expect(patchSpec(ctx, adminC, s, func(o *agentsv1alpha1.AgentSession) {
			o.Spec.Agent = &agentsv1alpha1.AgentBinding{ServiceAccountName: boundSA}
			o.Spec.Steer = &agentsv1alpha1.SteerMessage{ID: "m1", Text: "look at the tests first"}
		})).To(Succeed())

		By("another agent of the namespace, bound to the agent role there, cannot mark the message delivered")
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
		Expect(st.Message).To(ContainSubstring(`status.agent.steerID: Invalid value: "m9": the steer message of this session is "m1" (spec.steer.id)`))
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
		Expect(st.Message).To(ContainSubstring(`status.agent: Forbidden: "` + ci + `" is not an agent identity`))
		Expect(get(ctx, s).ResourceVersion).To(Equal(before.ResourceVersion))
	})

	It("with --webhook-require-agent-binding, binds one agent identity to one session, naming spec.agent and the fix", func() {
		// The suite's webhook runs without the requirement (its other specs write unbound
		// sessions), so this validator is a second one on the same manager cache and indexes,
		// called as the webhook server calls it; test/cluster runs it through the deployed
		// webhook, where config/default turns it on.
		strict := &AgentSessionValidator{RequireAgentBinding: true, Sessions: suiteCache, Identities: Identities{
			ManagerUsernames: []string{managerUser}, AgentGroups: []string{DefaultAgentGroup}, AgentServiceAccountPrefix: DefaultAgentServiceAccountPrefix,
		}}
		request := func(user string, sub string) context.Context {
			return admission.NewContextWithRequest(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UserInfo: authenticationv1.UserInfo{Username: user}, SubResource: sub,
			}})
		}
		session := func(name, sa string) *agentsv1alpha1.AgentSession {
			s := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name},
				Spec: agentsv1alpha1.AgentSessionSpec{SessionID: name, Steer: &agentsv1alpha1.SteerMessage{ID: "m1", Text: "look at the tests first"}}}
			if sa != "" {
				s.Spec.Agent = &agentsv1alpha1.AgentBinding{ServiceAccountName: sa}
			}
			return s
		}

		By("a session that names no agent is refused at create")
		_, err := strict.ValidateCreate(request(editorUser, ""), session(uniqueName("unbound"), ""))
		Expect(err).To(MatchError(ContainSubstring(`spec.agent: Required value: this operator lets only a session's bound agent write its status.agent: ` +
			`set spec.agent.serviceAccountName to the service account the agent pod runs as`)))

		By("a second session naming an agent service account already bound in the namespace is refused")
		sa := uniqueName("planmode-agent-x")
		first := session(uniqueName("first"), sa)
		Expect(adminC.Create(ctx, first)).To(Succeed())
		Eventually(func(g Gomega) {
			_, err := strict.ValidateCreate(request(editorUser, ""), session("second", sa))
			g.Expect(err).To(MatchError(ContainSubstring(`spec.agent.serviceAccountName: Invalid value: "` + sa + `": is already the agent of AgentSession "` +
				first.Name + `": an agent identity writes the status of one session only; ` +
				`run this session's agent as a service account of its own (kubectl create serviceaccount planmode-agent-<name>)`)))
		}).Should(Succeed())
		_, err = strict.ValidateCreate(request(editorUser, ""), session("second", uniqueName("planmode-agent-y")))
		Expect(err).NotTo(HaveOccurred(), "a service account of its own is accepted")
		_, err = strict.ValidateCreate(request(editorUser, ""), session(first.Name, sa))
		Expect(err).NotTo(HaveOccurred(), "a create retried under the same name is the same session")

		By("a session stored unbound keeps its spec (ratcheting), but may not drop a binding, and takes no status.agent from an agent")
		old := newSession(ctx) // stored by the suite's webhook, which does not require a binding
		toggled := old.DeepCopy()
		toggled.Spec.PlanMode.Active = ptr.To(true)
		_, err = strict.ValidateUpdate(request(editorUser, ""), old, toggled)
		Expect(err).NotTo(HaveOccurred())
		unbind := first.DeepCopy()
		unbind.Spec.Agent = nil
		_, err = strict.ValidateUpdate(request(editorUser, ""), first, unbind)
		Expect(err).To(MatchError(ContainSubstring("spec.agent: Required value")))
		old.Spec.Steer = &agentsv1alpha1.SteerMessage{ID: "m1", Text: "look at the tests first"}
		reported := old.DeepCopy()
		reported.Status.Agent = &agentsv1alpha1.AgentReport{SteerID: "m1"}
		_, err = strict.ValidateUpdate(request(agentUser, "status"), old, reported)
		Expect(err).To(MatchError(ContainSubstring(`status.agent: Forbidden: session "` + old.Name +
			`" names no agent (spec.agent) and this operator lets only a session's bound agent write its status.agent: ` +
			`bind it to the agent pod's service account with kubectl patch agentsession ` + old.Name + ` -n ` + testNS +
			` --type merge -p '{"spec":{"agent":{"serviceAccountName":"<service account>"}}}'`)))

		By("the bound agent writes its own session's status.agent, and not another's")
		reported = first.DeepCopy()
		reported.Status.Agent = &agentsv1alpha1.AgentReport{SteerID: "m1"}
		_, err = strict.ValidateUpdate(request(serviceAccountUsername(testNS, sa), "status"), first, reported)
		Expect(err).NotTo(HaveOccurred())
		other := session("other", uniqueName("planmode-agent-z"))
		reportedOther := other.DeepCopy()
		reportedOther.Status.Agent = &agentsv1alpha1.AgentReport{SteerID: "m1"}
		_, err = strict.ValidateUpdate(request(serviceAccountUsername(testNS, sa), "status"), other, reportedOther)
		Expect(err).To(MatchError(ContainSubstring(`status.agent: Forbidden: session "other" is bound to its agent's service account`)))
	})

	It("validates spec.reviewTimeout with its field path and the fix; negative and zero are refused", func() {
		create := func(timeout string) error {
			name := uniqueName("rt")
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": agentsv1alpha1.GroupVersion.String(), "kind": "AgentSession",
				"metadata": map[string]any{"name": name, "namespace": testNS},
				"spec":     map[string]any{"sessionID": name, "reviewTimeout": timeout},
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
