package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// The size budget: the CRD's per-field limits add up to more than etcd stores, so the webhook
// refuses, naming the field to shrink, what would otherwise fail later as a bare "request is too
// large" (of the user's write, or of the agent's plan post after it).
var _ = Describe("AgentSession size budget", func() {
	ctx := context.Background()
	big := strings.Repeat("x", 64<<10) // a queued message at the CRD's MaxLength
	queue := func(n int) []agentsv1alpha1.SteerMessage {
		q := make([]agentsv1alpha1.SteerMessage, n)
		for i := range q {
			q[i] = agentsv1alpha1.SteerMessage{ID: fmt.Sprintf("m%d", i+1), Text: big}
		}
		return q
	}

	It("refuses a user's write over its budget naming spec.steerQueue, and leaves room for the largest plan after the largest queue admitted", func() {
		s := newSession(ctx)
		full := MaxUserSessionBytes / len(big) // the most messages of that size a write may hold
		st := statusOf(patchSpec(ctx, as(editorUser), s, func(o *agentsv1alpha1.AgentSession) { o.Spec.SteerQueue = queue(full + 1) }))
		Expect(st.Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
		Expect(st.Message).To(MatchRegexp(`spec\.steerQueue: Invalid value: "\d+ bytes": the AgentSession would be \d+ bytes, over its budget of %d bytes \(etcd refuses objects much larger\); `+
			`this field holds the most: %d queued messages the agent has not taken yet; wait until it takes some \(kubectl plan status %s\) or send shorter ones`, MaxUserSessionBytes, full+1, s.Name))
		Expect(get(ctx, s).Spec.SteerQueue).To(BeEmpty())

		Expect(patchSpec(ctx, as(editorUser), s, func(o *agentsv1alpha1.AgentSession) { o.Spec.SteerQueue = queue(full - 1) })).To(Succeed())
		plan := "# The plan\n\n" + strings.Repeat("a", MaxPlanBytes-len("# The plan\n\n"))
		Expect(patchStatus(ctx, agentOf(s), s, func(o *agentsv1alpha1.AgentSession) {
			o.Status.Agent = &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: "r1", Plan: plan}}
		})).To(Succeed(), "the largest plan fits beside the largest queue a user may write")
		Expect(get(ctx, s).Status.Agent.Review.Plan).To(HaveLen(MaxPlanBytes))
	})

	It("refuses the agent's plan post over the whole budget naming the field, and lets a write that shrinks the session through", func() {
		v := &AgentSessionValidator{Identities: Identities{ManagerUsernames: []string{managerUser}, AgentServiceAccountPrefix: DefaultAgentServiceAccountPrefix}}
		h := admission.WithValidator[*agentsv1alpha1.AgentSession](scheme, v)
		old := &agentsv1alpha1.AgentSession{}
		old.APIVersion, old.Kind = agentsv1alpha1.GroupVersion.String(), "AgentSession"
		old.Name, old.Namespace = "big", testNS
		old.Spec.SessionID, old.Spec.Agent = "big", bindingFor("big")
		old.Spec.SteerQueue = queue(13) // stored before the budget
		posted := old.DeepCopy()
		posted.Status.Agent = &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: "r1", Plan: "# Plan\n\n" + strings.Repeat("p", 200<<10)}}
		handle := func(oldObj, obj *agentsv1alpha1.AgentSession) admission.Response {
			oldRaw, _ := json.Marshal(oldObj)
			raw, _ := json.Marshal(obj)
			return h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Update, SubResource: "status", Name: obj.Name, Namespace: obj.Namespace,
				UserInfo: authenticationv1.UserInfo{Username: serviceAccountUsername(testNS, old.Spec.Agent.ServiceAccountName)},
				Object:   runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: oldRaw}}})
		}
		r := handle(old, posted)
		Expect(r.Allowed).To(BeFalse())
		Expect(r.Result.Message).To(ContainSubstring("spec.steerQueue: Invalid value"))
		Expect(r.Result.Message).To(ContainSubstring(fmt.Sprintf("over its budget of %d bytes", MaxSessionBytes)))
		Expect(r.Result.Message).To(ContainSubstring("13 queued messages the agent has not taken yet"))

		By("a boundary report is not budgeted, and a withdrawn plan shrinks the session")
		reported := old.DeepCopy()
		reported.Status.Agent = &agentsv1alpha1.AgentReport{Boundary: &agentsv1alpha1.StepBoundary{Turn: 1, Step: 1, Seq: 0}}
		Expect(handle(old, reported).Allowed).To(BeTrue())
		Expect(handle(posted, old).Allowed).To(BeTrue())
	})
})

var _ = Describe("AgentSession size budget for metadata", func() {
	It("counts annotations a user adds to a full session, naming the field that holds the most", func() {
		ctx := context.Background()
		s := newSession(ctx)
		full := MaxUserSessionBytes / (64 << 10)
		Expect(patchSpec(ctx, as(editorUser), s, func(o *agentsv1alpha1.AgentSession) {
			o.Spec.SteerQueue = make([]agentsv1alpha1.SteerMessage, full-1)
			for i := range o.Spec.SteerQueue {
				o.Spec.SteerQueue[i] = agentsv1alpha1.SteerMessage{ID: fmt.Sprintf("m%d", i+1), Text: strings.Repeat("x", 64<<10)}
			}
		})).To(Succeed())
		st := statusOf(patchSpec(ctx, as(editorUser), s, func(o *agentsv1alpha1.AgentSession) {
			o.Annotations = map[string]string{"example.com/notes": strings.Repeat("n", 200<<10)}
		}))
		Expect(st.Message).To(ContainSubstring("spec.steerQueue: Invalid value"))
		Expect(get(ctx, s).Annotations).NotTo(HaveKey("example.com/notes"))
	})
})
