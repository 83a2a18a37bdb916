package agentsdk

import (
	"context"
	"errors"
	"fmt"

	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// ErrLogChanged means an append found events it cannot order itself after: another writer's
// events (only the manager's plan/mode may interleave with the agent's), or a plan/mode inside
// an open step or after the boundary that admitted the step. The agent should end the turn.
var ErrLogChanged = errors.New("session log changed under the agent")

// maxResequence bounds how often one append re-reads the tail after a conflict.
const maxResequence = 8

// NextSeq is the seq the client's next append will carry.
func (c *Client) NextSeq() int64 { return c.next }

// Resumed reports whether the log held a request/header before this client's first request,
// so the first header this process logs has reason "resume".
func (c *Client) Resumed() bool { return c.resumed }

// StartTurn appends turn/start for the next turn number (the last logged turn + 1) and returns
// it. A conflict with a plan/mode the manager committed between turns is re-sequenced.
func (c *Client) StartTurn(ctx context.Context) (int64, error) {
	for range maxResequence {
		t, err := c.store.Tail(ctx, c.sessionID)
		if err != nil {
			return 0, fmt.Errorf("start turn: read log tail: %w", err)
		}
		if t.TurnOpen {
			return 0, fmt.Errorf("start turn: turn %d is still open in session %q; end it first", t.Turn, c.sessionID)
		}
		c.next = t.NextSeq
		turn := t.Turn + 1
		_, err = c.append(ctx, c.next, []harness.Event{TurnStart(turn)})
		if sessionlog.IsConflict(err) {
			continue // re-read: the turn number may have moved too
		}
		if err != nil {
			return 0, fmt.Errorf("start turn %d: %w", turn, err)
		}
		return turn, nil
	}
	return 0, fmt.Errorf("start turn: %w: the log kept moving for %d attempts", ErrLogChanged, maxResequence)
}

// StepInput is what a step records after its boundary.
type StepInput struct {
	// Messages are the step's claimed input, in order (prompt, steered messages, ...). The
	// boundary's notice, if any, is appended after them.
	Messages []harness.Event
	// Header, when set, is the step's request header; request/header is logged when it differs
	// from the previous one (reason initial/resume/change).
	Header *harness.EpochHeader
}

// StartStep appends, in one compare-and-swap batch at res.NextSeq: step/start, in.Messages, the
// notice from res (last), and the request/header if it changed. It never re-sequences: the
// step's state was decided for exactly that position, so a conflict returns ErrLogChanged and
// the caller runs the boundary again (or ends the turn).
func (c *Client) StartStep(ctx context.Context, res Result, in StepInput) error {
	evs := make([]harness.Event, 0, len(in.Messages)+3)
	evs = append(evs, StepStart(res.Turn, res.Step))
	evs = append(evs, in.Messages...)
	for _, m := range res.Messages {
		evs = append(evs, SteeredMessage(m))
	}
	if res.Notice != "" {
		evs = append(evs, Notice(res.Notice))
	}
	headerLogged := false
	if in.Header != nil {
		if ev, ok := c.headers.Next(*in.Header, c.resumed); ok {
			evs = append(evs, ev)
			headerLogged = true
		}
	}
	if _, err := c.store.Append(ctx, c.sessionID, Sequence(res.NextSeq, evs...)); err != nil {
		if sessionlog.IsConflict(err) {
			return fmt.Errorf("start step %d of turn %d at seq %d: %w: %w", res.Step, res.Turn, res.NextSeq, ErrLogChanged, err)
		}
		return fmt.Errorf("start step %d of turn %d: %w", res.Step, res.Turn, err)
	}
	c.next = res.NextSeq + int64(len(evs))
	c.stepOpen = true
	if headerLogged {
		c.headers.Commit()
	}
	if n := len(res.Messages); n > 0 {
		c.steerDone, c.steerUnacked = res.Messages[n-1].ID, true
	}
	if c.steerUnacked {
		// Recorded in the log first, then acknowledged: a crash in between re-delivers the
		// message once rather than losing it.
		if err := c.patchAgent(ctx, map[string]any{agentFieldSteerID: c.steerDone}); err != nil {
			c.log.Error(err, "record steer id in status.agent (retried at the next step)", "steerID", c.steerDone)
		} else {
			c.steerUnacked = false
		}
	}
	return nil
}

// LogRequest logs a request/header for a request inside the open step (a request-recovery
// retry, or a later request of the same step), only if it differs from the previous header.
// Retries reuse the step's frozen assembly, so normally nothing is logged.
func (c *Client) LogRequest(ctx context.Context, h harness.EpochHeader) (bool, error) {
	ev, ok := c.headers.Next(h, c.resumed)
	if !ok {
		return false, nil
	}
	if _, err := c.Append(ctx, ev); err != nil {
		return false, err
	}
	c.headers.Commit()
	return true, nil
}

// EndStep appends step/end.
func (c *Client) EndStep(ctx context.Context, turn, step int64) error {
	if _, err := c.Append(ctx, StepEnd(turn, step)); err != nil {
		return err
	}
	c.stepOpen = false
	return nil
}

// EndTurn appends turn/end with the reason. After a failed proposal (a plan/mode the manager
// appended late may precede it) the append is re-sequenced.
func (c *Client) EndTurn(ctx context.Context, turn int64, reason harness.TurnEndReason) error {
	_, err := c.Append(ctx, TurnEnd(turn, reason))
	return err
}

// Append appends the agent's own events at the client's next seq (compare-and-swap). On a
// conflict outside an open step it re-reads the tail and re-sequences after the events that
// intervened, provided they are all the manager's plan/mode; anything else is ErrLogChanged.
func (c *Client) Append(ctx context.Context, evs ...harness.Event) (harness.Tail, error) {
	if len(evs) == 0 {
		return harness.Tail{}, errors.New("append: no events")
	}
	for range maxResequence {
		t, err := c.append(ctx, c.next, evs)
		if !sessionlog.IsConflict(err) {
			if err != nil {
				return t, fmt.Errorf("append %s at seq %d: %w", evs[0].Type, c.next, err)
			}
			return t, nil
		}
		if err := c.resequence(ctx, evs[0].Type); err != nil {
			return harness.Tail{}, err
		}
	}
	return harness.Tail{}, fmt.Errorf("append %s: %w: the log kept moving for %d attempts", evs[0].Type, ErrLogChanged, maxResequence)
}

func (c *Client) append(ctx context.Context, at int64, evs []harness.Event) (harness.Tail, error) {
	t, err := c.store.Append(ctx, c.sessionID, Sequence(at, evs...))
	if err == nil {
		c.next = t.NextSeq
	}
	return t, err
}

// resequence moves c.next past events another writer appended, if they are plan/mode events
// the agent may follow: outside an open step only.
func (c *Client) resequence(ctx context.Context, typ string) error {
	from := c.next
	intervening, err := c.store.ReadFrom(ctx, c.sessionID, from, maxResequence*4)
	if err != nil {
		return fmt.Errorf("append %s: re-read the log after a conflict at seq %d: %w", typ, from, err)
	}
	if len(intervening) == 0 {
		return fmt.Errorf("append %s: %w: conflict at seq %d but no events after it", typ, ErrLogChanged, from)
	}
	for _, ev := range intervening {
		if ev.Type != harness.TypePlanMode {
			return fmt.Errorf("append %s: %w: seq %d is a %s another writer appended; one live writer per session",
				typ, ErrLogChanged, ev.Seq, ev.Type)
		}
		if c.stepOpen {
			return fmt.Errorf("append %s: %w: a plan/mode was appended at seq %d inside an open step", typ, ErrLogChanged, ev.Seq)
		}
	}
	c.next = intervening[len(intervening)-1].Seq + 1
	return nil
}

// Sequence returns copies of evs numbered from next, as the client appends a batch: each
// tool/result pointing at its tool/call in the batch (sourceEventSeqs).
func Sequence(next int64, evs ...harness.Event) []harness.Event {
	out := make([]harness.Event, len(evs))
	for i, ev := range evs {
		ev.Seq = next + int64(i)
		out[i] = ev
	}
	linkToolResults(out)
	return out
}

// CloseInterrupted repairs a log left with an open turn by an earlier process of this agent
// (a crash): step/end for an open step, then turn/end {kind:'interrupted'}, as the harness's
// cold load does. It reports whether it closed a turn. Call it once at start-up, before the
// first StartTurn.
func (c *Client) CloseInterrupted(ctx context.Context) (bool, error) {
	t, err := c.store.Tail(ctx, c.sessionID)
	if err != nil {
		return false, fmt.Errorf("repair open turn: read log tail: %w", err)
	}
	if !t.TurnOpen {
		return false, nil
	}
	c.next = t.NextSeq
	var evs []harness.Event
	if t.StepOpen {
		evs = append(evs, StepEnd(t.Turn, t.Step))
	}
	evs = append(evs, TurnEnd(t.Turn, harness.TurnEndReason{Kind: harness.TurnEndInterrupted}))
	c.stepOpen = false
	if _, err := c.Append(ctx, evs...); err != nil {
		return false, fmt.Errorf("repair open turn %d: %w", t.Turn, err)
	}
	return true, nil
}
