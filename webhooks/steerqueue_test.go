package webhooks

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// Queued messages are checked like spec.steer, each at its own index: an id in the id format,
// no id twice (each is delivered once), and text that is not blank.
func TestSteerQueueFields(t *testing.T) {
	spec := &agentsv1alpha1.AgentSessionSpec{SessionID: "s", SteerQueue: []agentsv1alpha1.SteerMessage{
		{ID: "kp-1", Text: "first"},
		{ID: "kp-1", Text: "again"},
		{ID: "bad id", Text: "x"},
		{ID: "kp-3", Text: "   "},
	}}
	got := map[string]field.ErrorType{}
	for _, e := range validateSpecFields(spec) {
		got[e.Field] = e.Type
	}
	want := map[string]field.ErrorType{
		"spec.steerQueue[1].id":   field.ErrorTypeDuplicate,
		"spec.steerQueue[2].id":   field.ErrorTypeInvalid,
		"spec.steerQueue[3].text": field.ErrorTypeRequired,
	}
	if len(got) != len(want) {
		t.Fatalf("errors %v, want %v", got, want)
	}
	for f, typ := range want {
		if got[f] != typ {
			t.Errorf("%s: %q, want %q (all: %v)", f, got[f], typ, got)
		}
	}
}
