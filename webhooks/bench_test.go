package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// The handlers' own cost per admission request (no network, no TLS): what the webhook adds on
// top of the API server's round trip.
func BenchmarkPlanModeConfigHandler(b *testing.B) {
	for _, size := range []int{1 << 10, agentsv1alpha1.MaxSectionBytes} {
		section, _ := json.Marshal(strings.Repeat("Plan first. ", size/12))
		raw := []byte(`{"apiVersion":"agents.harness.dev/v1alpha1","kind":"PlanModeConfig","metadata":{"name":"default","namespace":"ns"},"spec":{"section":` + string(section) + `}}`)
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Name: "default", Namespace: "ns", Object: runtime.RawExtension{Raw: raw}}}
		b.Run(fmt.Sprintf("section=%dKiB", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if resp := fuzzHandler.Handle(context.Background(), req); !resp.Allowed {
					b.Fatal(resp.Result.Message)
				}
			}
		})
	}
}

func BenchmarkAgentSessionStatusUpdate(b *testing.B) {
	old := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Spec: agentsv1alpha1.AgentSessionSpec{SessionID: "s"}}
	old.Status.PlanMode.Active = true
	old.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "InSync"}}
	nw := old.DeepCopy()
	nw.Status.Agent = &agentsv1alpha1.AgentReport{Boundary: &agentsv1alpha1.StepBoundary{Turn: 3, Step: 2, Seq: 41}}
	oldRaw, _ := json.Marshal(old)
	newRaw, _ := json.Marshal(nw)
	h := admission.WithValidator[*agentsv1alpha1.AgentSession](fuzzScheme, &AgentSessionValidator{Identities: Identities{
		ManagerUsernames: []string{DefaultManagerUsername("planmode-system")}, AgentServiceAccountPrefix: DefaultAgentServiceAccountPrefix}})
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, SubResource: "status",
		Name: "s", Namespace: "ns", UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:ns:planmode-agent"},
		Object: runtime.RawExtension{Raw: newRaw}, OldObject: runtime.RawExtension{Raw: oldRaw}}}
	b.ReportAllocs()
	for b.Loop() {
		if resp := h.Handle(context.Background(), req); !resp.Allowed {
			b.Fatal(resp.Result.Message)
		}
	}
}
