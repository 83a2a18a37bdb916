package plancli

import (
	"testing"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// Each reply says what happened: the harness's words where they say it, plain ones where its
// copy would not (already on, already pending, a cancelled exit, applied before the reply).
func TestToggleReplyWords(t *testing.T) {
	const leave = "kubectl plan off demo"
	on, off := planmode.State{Logged: true}, planmode.State{}
	for _, tc := range []struct {
		name   string
		x      bool
		h      happened
		before planmode.State
		want   string
	}{
		{"on, committed", true, happened{outcome: planmode.Committed}, off, "Plan mode on. Use kubectl plan off demo to leave."},
		{"on, queued", true, happened{outcome: planmode.Queued}, off, "Entering plan mode (applies from the next step). Use kubectl plan off demo to leave."},
		{"on, applied", true, happened{outcome: planmode.Queued, appliedTurn: 4, appliedStep: 2}, off,
			"Plan mode on (applied at the agent's step 2 of turn 4). Use kubectl plan off demo to leave."},
		{"on, a pending exit cancelled", true, happened{outcome: planmode.Cancelled}, on, "Plan mode stays on: leaving it is cancelled. Use kubectl plan off demo to leave."},
		{"on, already on", true, happened{outcome: planmode.Noop}, on, "Plan mode is already on. Use kubectl plan off demo to leave."},
		{"on, entry already pending", true, happened{outcome: planmode.Noop}, planmode.State{Pending: &planmode.Pending{Active: true}},
			"Entering plan mode is already pending (applies from the next step). Use kubectl plan off demo to leave."},
		{"off, committed", false, happened{outcome: planmode.Committed}, on, harness.ReplyOffCommitted},
		{"off, queued", false, happened{outcome: planmode.Queued}, on, harness.ReplyOffDeferred},
		{"off, applied", false, happened{outcome: planmode.Queued, appliedTurn: 3, appliedStep: 1}, on, "Plan mode off (applied at the agent's step 1 of turn 3)."},
		{"off, entry cancelled", false, happened{outcome: planmode.Cancelled}, off, harness.ReplyOffCancelled},
		{"off, already off", false, happened{outcome: planmode.Noop}, off, "Plan mode is already off."},
		{"off, leaving already pending", false, happened{outcome: planmode.Noop}, planmode.State{Logged: true, Pending: &planmode.Pending{Active: false}},
			"Leaving plan mode is already pending (applies from the next step)."},
	} {
		if got := toggleReply(tc.x, tc.h, tc.before, leave); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestMessageReplyWords(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    happened
		want string
	}{
		{"a turn started for it", happened{msg: delivery{looked: true, delivered: true, located: true, startedTurn: true, turn: 5, step: 1}},
			"Message delivered: the agent started turn 5 with it."},
		{"recorded in an open turn", happened{msg: delivery{looked: true, delivered: true, located: true, turn: 4, step: 3}},
			"Message delivered at the agent's step 3 of turn 4."},
		{"recorded, where unknown", happened{msg: delivery{looked: true, delivered: true}}, "Message delivered: the agent has recorded it."},
		{"a turn is open", happened{turnOpen: true, msg: delivery{looked: true}}, "Message queued for the agent's next step, after the messages queued before it."},
		{"idle, not taken", happened{msg: delivery{looked: true}}, "Message queued; the agent has not taken it yet (an idle agent starts a turn with it)."},
		{"idle, not looked (--wait=0)", happened{}, "Message queued; the agent is idle, so it starts a turn with it."},
	} {
		if got := messageReply(tc.h); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Where plan/mode landed after the write decides the reply: outside a turn, committed at once;
// inside one, at the step boundary whose step/start follows it.
func TestFromLog(t *testing.T) {
	ev := func(typ, data string) harness.Event { return event(typ, data) }
	betweenTurns := []harness.Event{ev("plan/mode", `{"active":true}`), ev("turn/start", `{"turn":5}`), ev("step/start", `{"turn":5,"step":1}`)}
	idle, open := harness.EmptyTail(), harness.EmptyTail()
	idle.Turn = 4
	open.Turn, open.TurnOpen, open.Step, open.StepOpen = 4, true, 1, true
	if h := fromLog(betweenTurns, true, idle, happened{outcome: planmode.Queued}); h.outcome != planmode.Committed || h.appliedTurn != 0 {
		t.Errorf("between turns: %+v", h)
	}
	atBoundary := []harness.Event{ev("step/end", `{"turn":4,"step":1}`), ev("plan/mode", `{"active":true}`), ev("step/start", `{"turn":4,"step":2}`)}
	if h := fromLog(atBoundary, true, open, happened{outcome: planmode.Committed}); h.outcome != planmode.Queued || h.appliedTurn != 4 || h.appliedStep != 2 {
		t.Errorf("at a boundary: %+v", h)
	}
	// A turn that opened after the write, then the boundary of its second step.
	laterTurn := []harness.Event{ev("turn/end", `{"turn":4,"reason":{"kind":"completed"}}`), ev("turn/start", `{"turn":5}`), ev("step/start", `{"turn":5,"step":1}`),
		ev("step/end", `{"turn":5,"step":1}`), ev("plan/mode", `{"active":false}`), ev("step/start", `{"turn":5,"step":2}`)}
	if h := fromLog(laterTurn, false, open, happened{outcome: planmode.Queued}); h.appliedTurn != 5 || h.appliedStep != 2 {
		t.Errorf("in a later turn: %+v", h)
	}
	// Nothing of x in the log: the status's outcome stays.
	if h := fromLog(atBoundary, false, open, happened{outcome: planmode.Queued}); h.outcome != planmode.Queued || h.appliedTurn != 0 {
		t.Errorf("no plan/mode {false}: %+v", h)
	}
}

func TestFindMessage(t *testing.T) {
	user := func(text string) harness.Event {
		return harness.MustEvent(harness.TypeUserMessage, harness.NewUserText("m", text))
	}
	notice := harness.MustEvent(harness.TypeUserMessage, harness.NewPluginNotice("n", harness.NoticeSourcePlugin, "look around"))
	idle, open := harness.EmptyTail(), harness.EmptyTail()
	idle.Turn = 4
	open.Turn, open.TurnOpen, open.Step, open.StepOpen = 4, true, 2, true
	started := []harness.Event{event("turn/start", `{"turn":5}`), event("step/start", `{"turn":5,"step":1}`), notice, user("look around")}
	if d := findMessage(started, "look around", idle); !d.delivered || !d.startedTurn || d.turn != 5 || d.step != 1 {
		t.Errorf("a turn for the message: %+v", d)
	}
	inTurn := []harness.Event{event("step/end", `{"turn":4,"step":2}`), event("step/start", `{"turn":4,"step":3}`), user("look around")}
	if d := findMessage(inTurn, "look around", open); !d.delivered || d.startedTurn || d.turn != 4 || d.step != 3 {
		t.Errorf("into an open turn: %+v", d)
	}
	if d := findMessage([]harness.Event{notice}, "look around", idle); d.delivered {
		t.Errorf("a plugin notice with the same text is not the message: %+v", d)
	}
}

// Recorded: status.agent.steerID names the message, a later one, or the message is gone from
// the queue (a writer dropped it as recorded).
func TestRecorded(t *testing.T) {
	as := session("demo")
	as.Spec.SteerQueue = []v1alpha1.SteerMessage{{ID: "a", Text: "1"}, {ID: "b", Text: "2"}, {ID: "c", Text: "3"}}
	for _, tc := range []struct {
		acked, id string
		want      bool
	}{{"", "b", false}, {"a", "b", false}, {"b", "b", true}, {"c", "b", true}, {"c", "gone", true}} {
		as.Status.Agent = &v1alpha1.AgentReport{SteerID: tc.acked}
		if got := recorded(as, tc.id); got != tc.want {
			t.Errorf("steerID %q, message %q: recorded %v, want %v", tc.acked, tc.id, got, tc.want)
		}
	}
}
