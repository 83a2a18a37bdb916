package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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

// FuzzAgentSessionStatusOwnership sends arbitrary old and new status JSON as an agent through
// the status-subresource handler. Properties: no panic; an undecodable object is a 400, never
// an admission; a decodable update is allowed exactly when everything outside status.agent is
// unchanged (and a posted review id is well formed).
func FuzzAgentSessionStatusOwnership(f *testing.F) {
	f.Add([]byte(`{}`), []byte(`{"agent":{"boundary":{"turn":1,"step":1,"seq":3}}}`))
	f.Add([]byte(`{"planMode":{"active":false}}`), []byte(`{"planMode":{"active":true}}`))
	f.Add([]byte(`{"conditions":[{"type":"Ready","status":"True","reason":"InSync","message":"","lastTransitionTime":"2026-11-30T00:00:00Z"}]}`), []byte(`{}`))
	f.Add([]byte(`{"agent":{"review":{"id":"r1","plan":"# p"}}}`), []byte(`{"agent":{"review":{"id":"bad id","plan":"# p"}}}`))
	f.Add([]byte(`{"observedGeneration":1}`), []byte(`{"observedGeneration":2,"review":{"id":"r","phase":"Approved"}}`))
	h := admission.WithValidator[*agentsv1alpha1.AgentSession](fuzzScheme, &AgentSessionValidator{Identities: Identities{
		ManagerUsernames: []string{DefaultManagerUsername("planmode-system")}, AgentServiceAccountPrefix: DefaultAgentServiceAccountPrefix}})
	wrap := func(status []byte) []byte {
		return []byte(`{"apiVersion":"agents.harness.dev/v1alpha1","kind":"AgentSession","metadata":{"name":"s","namespace":"ns"},"spec":{"sessionID":"s"},"status":` + string(status) + `}`)
	}
	f.Fuzz(func(t *testing.T, oldStatus, newStatus []byte) {
		oldRaw, newRaw := wrap(oldStatus), wrap(newStatus)
		resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Update, SubResource: "status", Name: "s", Namespace: "ns",
			UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:ns:planmode-agent"},
			Object:   runtime.RawExtension{Raw: newRaw}, OldObject: runtime.RawExtension{Raw: oldRaw}}})
		var o, n agentsv1alpha1.AgentSession
		if err := decodeLikeAdmission(oldRaw, &o); err != nil {
			if resp.Allowed {
				t.Fatalf("an undecodable old object was admitted: %v", err)
			}
			return
		}
		if err := decodeLikeAdmission(newRaw, &n); err != nil {
			if resp.Allowed {
				t.Fatalf("an undecodable new object was admitted: %v", err)
			}
			return
		}
		oldRest, newRest := o.Status.DeepCopy(), n.Status.DeepCopy()
		oldRest.Agent, newRest.Agent = nil, nil
		want := equality.Semantic.DeepEqual(oldRest, newRest)
		if a := n.Status.Agent; want && a != nil && a.Review != nil && len(validateID(nil, a.Review.ID)) > 0 {
			want = false
		}
		if resp.Allowed != want {
			t.Fatalf("allowed=%v, want %v (old %s, new %s): %+v", resp.Allowed, want, oldStatus, newStatus, resp.Result)
		}
	})
}

func decodeLikeAdmission(raw []byte, into *agentsv1alpha1.AgentSession) error {
	return admission.NewDecoder(fuzzScheme).DecodeRaw(runtime.RawExtension{Raw: raw}, into)
}
