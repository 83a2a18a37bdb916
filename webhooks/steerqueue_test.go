package webhooks

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// Queued messages are checked each at its own index: an id in the id format, no id twice (each
// is delivered once), and text that is not blank.
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

// The ids a write adds come after every id the session has used: the queue's last and the last
// delivered (status.agent.steerID), so an id dropped from the queue is still refused later.
func TestSteerQueueIDsAreUsedOnce(t *testing.T) {
	msgs := func(ids ...string) []agentsv1alpha1.SteerMessage {
		q := make([]agentsv1alpha1.SteerMessage, 0, len(ids))
		for _, id := range ids {
			q = append(q, agentsv1alpha1.SteerMessage{ID: id, Text: "t " + id})
		}
		return q
	}
	session := func(delivered string, ids ...string) *agentsv1alpha1.AgentSession {
		s := &agentsv1alpha1.AgentSession{}
		s.Spec.SteerQueue = msgs(ids...)
		if delivered != "" {
			s.Status.Agent = &agentsv1alpha1.AgentReport{SteerID: delivered}
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		old    *agentsv1alpha1.AgentSession
		queue  []string
		errsAt []string
	}{
		{"create in order", nil, []string{"m1", "m2", "m10"}, nil},
		{"create out of order", nil, []string{"m2", "m1"}, []string{"spec.steerQueue[1].id"}},
		{"append after the last", session("", "m1"), []string{"m1", "m2"}, nil},
		{"append before the last", session("", "m5"), []string{"m5", "m4"}, []string{"spec.steerQueue[1].id"}},
		{"drop the delivered, append", session("m1", "m1", "m2"), []string{"m2", "m3"}, nil},
		{"an id after the delivered one, once it is dropped", session("m1", "m1"), []string{"m1x"}, nil},
		{"the delivered id again, once it is dropped", session("m1", "m1"), []string{"m1"}, nil},
		{"reuse the last delivered id of an emptied queue", session("m7"), []string{"m7"}, []string{"spec.steerQueue[0].id"}},
		{"an id before the last delivered", session("m7"), []string{"m3"}, []string{"spec.steerQueue[0].id"}},
		{"a new message ahead of a kept one", session("", "m1"), []string{"m2", "m1"}, []string{"spec.steerQueue[0].id"}},
		{"numbers compare by value", session("m9"), []string{"m10"}, nil},
	} {
		obj := &agentsv1alpha1.AgentSession{}
		if tc.old != nil {
			obj = tc.old.DeepCopy()
		}
		obj.Spec.SteerQueue = msgs(tc.queue...)
		errs := validateSteerQueue(tc.old, obj)
		got := make([]string, 0, len(errs))
		for _, e := range errs {
			got = append(got, e.Field)
		}
		if len(got) != len(tc.errsAt) || (len(got) > 0 && got[0] != tc.errsAt[0]) {
			t.Errorf("%s: errors at %q, want %q", tc.name, got, tc.errsAt)
		}
	}
	// A kept message may not change under its id.
	old := session("", "m1")
	obj := old.DeepCopy()
	obj.Spec.SteerQueue[0].Text = "changed"
	if errs := validateSteerQueue(old, obj); len(errs) != 1 || errs[0].Field != "spec.steerQueue[0].id" {
		t.Errorf("a changed message under its id: %v", errs)
	}
}

// The agent records the id of the last message it delivered: an id from spec.steerQueue is
// taken; an id no message of the session has is refused on status.agent.steerID, since it
// would mark a message delivered that never was.
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
}
