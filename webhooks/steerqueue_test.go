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

// The agent records the id of the last message it delivered: an id from spec.steerQueue (or the
// v1 spec.steer) is taken; an id no message of the session has is refused on
// status.agent.steerID, since it would mark a message delivered that never was.
func TestSteerIDFromTheQueue(t *testing.T) {
	old := &agentsv1alpha1.AgentSession{}
	old.Spec.SteerQueue = []agentsv1alpha1.SteerMessage{{ID: "kp-1", Text: "first"}, {ID: "kp-2", Text: "second"}}
	for id, wantErr := range map[string]bool{"kp-1": false, "kp-2": false, "": false, "kp-9": true} {
		obj := old.DeepCopy()
		obj.Status.Agent = &agentsv1alpha1.AgentReport{SteerID: id}
		errs := validateSteerID(old, obj)
		if (len(errs) > 0) != wantErr {
			t.Errorf("steerID %q: %v, want an error: %v", id, errs, wantErr)
		}
		if wantErr && (len(errs) != 1 || errs[0].Field != "status.agent.steerID") {
			t.Errorf("steerID %q: %v, want one error on status.agent.steerID", id, errs)
		}
	}
	v1 := &agentsv1alpha1.AgentSession{}
	v1.Spec.Steer = &agentsv1alpha1.SteerMessage{ID: "kp-7", Text: "v1"}
	obj := v1.DeepCopy()
	obj.Status.Agent = &agentsv1alpha1.AgentReport{SteerID: "kp-7"}
	if errs := validateSteerID(v1, obj); len(errs) != 0 {
		t.Errorf("the v1 spec.steer id refused: %v", errs)
	}
}
