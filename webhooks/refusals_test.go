package webhooks

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// A refusal is one info line naming the object, the user and the API server's message; an
// admitted write logs nothing.
func TestRefusalsAreLogged(t *testing.T) {
	var lines []string
	log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
	h := logRefusals(NewPlanModeConfigHandler(fuzzScheme), log)
	create := func(spec string) admission.Response {
		raw := []byte(`{"apiVersion":"agents.harness.dev/v1alpha1","kind":"PlanModeConfig","metadata":{"name":"c","namespace":"team-a"},"spec":` + spec + `}`)
		return h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Name: "c", Namespace: "team-a",
			Kind:     metav1.GroupVersionKind{Group: "agents.harness.dev", Version: "v1alpha1", Kind: "PlanModeConfig"},
			UserInfo: authenticationv1.UserInfo{Username: "flux"}, Object: runtime.RawExtension{Raw: raw}}})
	}

	if r := create(`{"section":"Plan first."}`); !r.Allowed {
		t.Fatalf("a good config was refused: %v", r.Result)
	}
	if len(lines) != 0 {
		t.Fatalf("an admitted write logged %q", lines)
	}
	r := create(`{"section":"Plan first.","tools":["write"]}`)
	if r.Allowed {
		t.Fatal("a config with an unknown key was admitted")
	}
	if len(lines) != 1 {
		t.Fatalf("want one line for the refusal, got %q", lines)
	}
	for _, want := range []string{`"msg"="refused"`, `"operation"="CREATE"`, `"kind"="PlanModeConfig"`, `"namespace"="team-a"`,
		`"name"="c"`, `"user"="flux"`, `"code"=422`, strings.ReplaceAll(r.Result.Message, `"`, `\"`)} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the refusal line lacks %s: %s", want, lines[0])
		}
	}
}
