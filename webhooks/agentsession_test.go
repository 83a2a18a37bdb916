package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// A session stored with a value a later rule refuses (here a configRef that is no object name)
// can still have its metadata changed, e.g. the manager removing its finalizer; a spec change
// is judged in full.
func TestAgentSessionUpdateRatchets(t *testing.T) {
	h := admission.WithValidator[*agentsv1alpha1.AgentSession](fuzzScheme, &AgentSessionValidator{Identities: Identities{
		ManagerUsernames: []string{DefaultManagerUsername("planmode-system")}}})
	legacy := &agentsv1alpha1.AgentSession{
		TypeMeta:   metav1.TypeMeta{APIVersion: agentsv1alpha1.GroupVersion.String(), Kind: "AgentSession"},
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Finalizers: []string{"agents.harness.dev/log"}},
		Spec: agentsv1alpha1.AgentSessionSpec{SessionID: "s", PlanMode: agentsv1alpha1.PlanModeSpec{
			ConfigRef: &agentsv1alpha1.ConfigReference{Name: "Team_Plan"}}},
	}
	update := func(newObj *agentsv1alpha1.AgentSession) admission.Response {
		oldRaw, _ := json.Marshal(legacy)
		newRaw, _ := json.Marshal(newObj)
		return h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Update, Name: "s", Namespace: "ns",
			UserInfo: authenticationv1.UserInfo{Username: DefaultManagerUsername("planmode-system")},
			Object:   runtime.RawExtension{Raw: newRaw}, OldObject: runtime.RawExtension{Raw: oldRaw}}})
	}
	released := legacy.DeepCopy()
	released.Finalizers = nil
	if r := update(released); !r.Allowed {
		t.Fatalf("removing a finalizer from a legacy session refused: %v", r.Result)
	}
	toggled := legacy.DeepCopy()
	toggled.Spec.PlanMode.Active = new(bool)
	if r := update(toggled); r.Allowed {
		t.Fatal("a spec change must be judged in full (the configRef is still invalid)")
	}
}
