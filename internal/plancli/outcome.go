package plancli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// A toggle's reply says what happened, read from what the manager acts on: its status after it
// took the selection on and, when the session log's store is known (make run records it in the
// kubeconfig), the log itself: where the plan/mode event landed (between turns: committed now;
// at a step boundary: queued, then applied) and where the message was recorded.

// deliveryWait bounds how long a message to an idle agent is watched for its turn: a running
// agent takes it at once (its watch sees the write), so a longer wait only delays the reply
// when no agent runs.
const deliveryWait = 3 * time.Second

// maxLogScan bounds the events read after the write to find what happened.
const maxLogScan = 2000

// sessionLog is the session's log, read-only.
type sessionLog struct {
	store     sessionlog.Store
	sessionID string
}

// openSessionLog opens the session's log when its store is known; nil when none is, or when it
// cannot be read (said on warn: the reply then comes from the manager's status alone). A session
// whose log does not exist yet (no agent has run, nothing committed) reads as an empty log.
func (o *Options) openSessionLog(ctx context.Context, sessionID string, warn io.Writer) *sessionLog {
	url, err := o.storeURL("")
	if err != nil || url == "" {
		return nil
	}
	store, err := sessionlog.OpenReadOnly(ctx, url)
	if err != nil {
		fmt.Fprintf(warn, "warning: the session log was not read (%v); the reply comes from the manager's status\n", err)
		return nil
	}
	return &sessionLog{store: store, sessionID: sessionID}
}

func (l *sessionLog) close() {
	if l != nil {
		_ = l.store.Close()
	}
}

// tail is the log's tail; a log not created yet has the empty tail, as the manager sees it.
func (l *sessionLog) tail(ctx context.Context) (harness.Tail, error) {
	return l.store.Tail(ctx, l.sessionID)
}

func (l *sessionLog) since(ctx context.Context, from int64) ([]harness.Event, error) {
	return l.store.ReadFrom(ctx, l.sessionID, from, maxLogScan)
}

// happened is what a toggle did.
type happened struct {
	outcome planmode.Outcome
	// appliedTurn and appliedStep: queued, then applied at that step boundary before the reply.
	appliedTurn, appliedStep int64
	// turnOpen: a turn is open, as the last look at the log (or the status) showed.
	turnOpen bool
	msg      delivery
}

// delivery is what became of a message.
type delivery struct {
	// looked: the plugin watched for it (a manager answered, and --wait was not 0).
	looked, delivered bool
	// where is known (from the log): turn and step; startedTurn: the agent opened the turn
	// for it.
	located, startedTurn bool
	turn, step           int64
}

// fromLog reads where plan/mode {x} landed in evs, the events after the write, folded from
// at, the log's tail before them (the one fold, harness.Tail.Apply): outside a turn it was
// committed at once; inside one, at the step boundary whose step/start follows it. Nothing
// found keeps h as the status has it.
func fromLog(evs []harness.Event, x bool, at harness.Tail, h happened) happened {
	t, found := at, false
	for i := range evs {
		f, err := harness.Check(&evs[i])
		if err != nil {
			continue
		}
		ev := &evs[i]
		switch {
		case found && ev.Type == harness.TypeStepStart:
			t.Apply(ev, f)
			h.appliedTurn, h.appliedStep = t.Turn, t.Step
			return h
		case !found && ev.Type == harness.TypePlanMode && isPlanMode(ev, x):
			if !t.TurnOpen {
				h.outcome, h.appliedTurn, h.appliedStep = planmode.Committed, 0, 0
				return h
			}
			found, h.outcome = true, planmode.Queued
		}
		t.Apply(ev, f)
	}
	return h
}

func isPlanMode(ev *harness.Event, active bool) bool {
	var pm harness.PlanMode
	return json.Unmarshal(ev.Data, &pm) == nil && pm.Active == active
}

// findMessage looks for the user message text in evs, the events after the write, folded from
// at: the turn and step that hold it, and whether its turn started after the write.
func findMessage(evs []harness.Event, text string, at harness.Tail) delivery {
	t := at
	for i := range evs {
		f, err := harness.Check(&evs[i])
		if err != nil {
			continue
		}
		if evs[i].Type == harness.TypeUserMessage && userText(evs[i]) == text {
			return delivery{looked: true, delivered: true, located: true, startedTurn: t.Turn > at.Turn, turn: t.Turn, step: t.Step}
		}
		t.Apply(&evs[i], f)
	}
	return delivery{}
}

// userText is the text of a message a person sent; empty for a plugin's notice.
func userText(ev harness.Event) string {
	var m harness.UserMessage
	if json.Unmarshal(ev.Data, &m) != nil || m.Source.Kind != harness.SourceKindUser {
		return ""
	}
	var b strings.Builder
	for _, c := range m.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// recorded reports whether the agent has recorded message id: status.agent.steerID names it,
// or a message queued after it, or a writer dropped it from the queue as recorded.
func recorded(as *v1alpha1.AgentSession, id string) bool {
	if as.Status.Agent == nil || as.Status.Agent.SteerID == "" {
		return false
	}
	acked := as.Status.Agent.SteerID
	if acked == id {
		return true
	}
	q := as.Spec.SteerQueue
	mine := slices.IndexFunc(q, func(m v1alpha1.SteerMessage) bool { return m.ID == id })
	return mine < 0 || slices.IndexFunc(q, func(m v1alpha1.SteerMessage) bool { return m.ID == acked }) > mine
}

// awaitDelivery watches for the message the toggle queued: in the log when it is known, else
// in the status. An idle agent is given up to budget; into an open turn (turnOpen, as the last
// look showed) the message waits for the agent's next step, so one look is all. An agent idle at
// the write starts a turn with the message, and a turn open by now is most likely that one,
// whose first step records it: that agent counts as idle.
func (o *Options) awaitDelivery(ctx context.Context, name string, w written, lv *sessionLog, turnOpen bool, budget time.Duration) delivery {
	idle := !turnOpen || !w.before.TurnOpen
	var d delivery
	check := func(ctx context.Context) (bool, error) {
		if lv != nil {
			evs, err := lv.since(ctx, w.from)
			if err != nil {
				return true, nil // the log stopped answering: report what is known
			}
			d = findMessage(evs, w.text, w.fromTail)
			return d.delivered, nil
		}
		as, err := o.get(ctx, name)
		if err != nil {
			return true, nil
		}
		d = delivery{delivered: recorded(as, w.msgID)}
		return d.delivered, nil
	}
	if idle && budget > 0 {
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, budget, true, check)
	} else {
		_, _ = check(ctx)
	}
	d.looked = true
	return d
}

// toggleReply is the first line of a toggle's reply: what happened to the selection x, in the
// harness's /plan words where they say it (the entering replies naming leave, the command that
// leaves plan mode), and plainly where the harness's copy would not (already on, already
// pending, a cancelled exit, a selection applied before the reply).
func toggleReply(x bool, h happened, before planmode.State, leave string) string {
	words := func(reply string) string { return strings.ReplaceAll(reply, "/plan off", leave) }
	applied := h.outcome == planmode.Queued && h.appliedTurn > 0
	if x {
		switch {
		case h.outcome == planmode.Committed:
			return words(harness.ReplyOnCommitted)
		case applied:
			return fmt.Sprintf("Plan mode on (applied at the agent's step %d of turn %d). Use %s to leave.", h.appliedStep, h.appliedTurn, leave)
		case h.outcome == planmode.Queued:
			return words(harness.ReplyOnDeferred)
		case h.outcome == planmode.Cancelled:
			return fmt.Sprintf("Plan mode stays on: leaving it is cancelled. Use %s to leave.", leave)
		case before.Logged:
			return fmt.Sprintf("Plan mode is already on. Use %s to leave.", leave)
		}
		return fmt.Sprintf("Entering plan mode is already pending (applies from the next step). Use %s to leave.", leave)
	}
	switch {
	case h.outcome == planmode.Committed:
		return harness.ReplyOffCommitted
	case applied:
		return fmt.Sprintf("Plan mode off (applied at the agent's step %d of turn %d).", h.appliedStep, h.appliedTurn)
	case h.outcome == planmode.Queued:
		return harness.ReplyOffDeferred
	case h.outcome == planmode.Cancelled:
		return harness.ReplyOffCancelled
	case before.Logged:
		return "Leaving plan mode is already pending (applies from the next step)."
	}
	return "Plan mode is already off."
}

// messageReply is the second line of a toggle with a message: where the message went.
func messageReply(h happened) string {
	d := h.msg
	switch {
	case d.delivered && d.located && d.startedTurn:
		return fmt.Sprintf("Message delivered: the agent started turn %d with it.", d.turn)
	case d.delivered && d.located:
		return fmt.Sprintf("Message delivered at the agent's step %d of turn %d.", d.step, d.turn)
	case d.delivered:
		return "Message delivered: the agent has recorded it."
	case h.turnOpen:
		return "Message queued for the agent's next step, after the messages queued before it."
	case d.looked:
		return "Message queued; the agent has not taken it yet (an idle agent starts a turn with it)."
	}
	return "Message queued; the agent is idle, so it starts a turn with it."
}
