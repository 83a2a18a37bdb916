package plancli

import (
	"testing"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

func bp(b bool) *bool { return &b }

func pend(b bool) *planmode.Pending { return &planmode.Pending{Active: b, Narrate: true} }

// /plan replies for every row of the set() table.
func TestReply(t *testing.T) {
	cases := []struct {
		s    planmode.State
		x    bool
		want string
	}{
		{planmode.State{Logged: false}, true, harness.ReplyOnCommitted},
		{planmode.State{Logged: false, TurnOpen: true}, true, harness.ReplyOnDeferred},
		{planmode.State{Logged: true}, true, harness.ReplyOnDeferred}, // the noop copy quirk
		{planmode.State{Logged: false, Pending: pend(false), TurnOpen: true}, true, harness.ReplyOnDeferred},
		{planmode.State{Logged: true}, false, harness.ReplyOffCommitted},
		{planmode.State{Logged: true, TurnOpen: true}, false, harness.ReplyOffDeferred},
		{planmode.State{Logged: true, Pending: pend(false), TurnOpen: true}, false, harness.ReplyOffDeferred}, // noop, logged T
		{planmode.State{Logged: false, Pending: pend(true), TurnOpen: true}, false, harness.ReplyOffCancelled},
		{planmode.State{Logged: false, Pending: pend(true)}, false, harness.ReplyOffCancelled},
		{planmode.State{Logged: false}, false, harness.ReplyOffAlreadyOff},
	}
	for i, c := range cases {
		if _, got := Decide(c.s, c.x); got != c.want {
			t.Errorf("case %d (%+v set %v): got %q, want %q", i, c.s, c.x, got, c.want)
		}
	}
}

// A selection in spec that the manager has not taken on yet is applied before ours.
func TestStateOfAppliesUnprocessedSelection(t *testing.T) {
	as := &v1alpha1.AgentSession{}
	as.Spec.PlanMode.Active = bp(true)
	as.Status.PlanMode.TurnOpen = true
	s := StateOf(as)
	if s.Logged || s.Pending == nil || !s.Pending.Active {
		t.Fatalf("unprocessed entry during a turn: got %+v, want logged false pending true", s)
	}
	if o, txt := Decide(s, false); o != planmode.Cancelled || txt != harness.ReplyOffCancelled {
		t.Fatalf("off after an unprocessed entry: got %s %q, want cancelled", o, txt)
	}
	as.Status.PlanMode.Selection = bp(true) // taken on: status is authoritative
	if s = StateOf(as); s.Pending != nil {
		t.Fatalf("a processed selection must not be applied twice: %+v", s.Pending)
	}
	// Between turns an unprocessed entry is a commit.
	as.Status.PlanMode.Selection = nil
	as.Status.PlanMode.TurnOpen = false
	if s = StateOf(as); !s.Logged || s.Pending != nil {
		t.Fatalf("unprocessed entry between turns: got %+v, want logged true", s)
	}
	// An approved exit pending: "on" cancels it (entering copy).
	as = &v1alpha1.AgentSession{}
	as.Status.PlanMode = v1alpha1.PlanModeStatus{Active: true, Pending: true, PendingActive: bp(false), PendingSource: v1alpha1.PendingSourceExit, TurnOpen: true}
	if o, txt := Decide(StateOf(as), true); o != planmode.Cancelled || txt != harness.ReplyOnDeferred {
		t.Fatalf("on during an approved exit: got %s %q", o, txt)
	}
}
