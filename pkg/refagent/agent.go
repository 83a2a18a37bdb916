package refagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// DefaultSystem is the reference agent's base system prompt; the plan section is appended to
// it, after a blank line, while plan mode is committed.
const DefaultSystem = "You are a coding agent (planmode-operator reference agent)."

// BaseTools are declared in every request; exit_plan_mode is added first while plan mode is
// committed.
var BaseTools = []harness.ToolSchema{
	{Name: "read", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
	{Name: "write", Description: "Write a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`)},
}

// Options configure one reference agent.
type Options struct {
	// Client is the agent's SDK client (its AgentSession and log).
	Client *agentsdk.Client
	// Script to run.
	Script Script
	// Loop repeats the script until the context ends.
	Loop bool
	// StepDelay is the "model time" of each step: between its request and its step/end.
	StepDelay time.Duration
	// BoundaryTimeout bounds each boundary's wait for the manager; without an answer by then
	// the step proceeds under the committed state. Zero: the client's Options.BoundaryWait.
	BoundaryTimeout time.Duration
	// ReviewTimeout bounds an exit_plan_mode call's wait for the review (default
	// DefaultReviewTimeout); spec.reviewTimeout is the manager's own expiry.
	ReviewTimeout time.Duration
	// Model is the request config; default provider "reference", model "scripted".
	Model harness.LLMCallConfig
	// System is the base system prompt (default DefaultSystem).
	System string
	// WaitForMessages keeps the agent serving after the script (without Loop): while idle it
	// waits for user messages (kubectl plan message), and each arrival starts a turn whose
	// first step records them, as the harness's steer() starts a turn on an idle agent. Run
	// returns when ctx ends.
	WaitForMessages bool
	// OnStep, when set, is called after every step proposal (admitted or failed).
	OnStep func(StepRecord)
	Logger logr.Logger
}

// StepRecord describes one step proposal.
type StepRecord struct {
	Turn, Step int64
	// Asked: the boundary wrote a report and waited for the manager.
	Asked bool
	// Unanswered: no answer came within the wait; the step ran under the committed state.
	// Adopted: the step took a plan/mode the manager appended for it after the wait.
	Unanswered, Adopted bool
	// Latency of the Boundary call as the agent observed it.
	Latency time.Duration
	// Active is the committed state the step used; Notice the notice it recorded.
	Active bool
	Notice string
	// HeaderLogged: the step logged a request/header (its header changed).
	HeaderLogged bool
	// Err is the reason the proposal failed (the turn then ends with turn/end {blocked}).
	Err error
}

// Stats summarise a run.
type Stats struct {
	Turns, Steps, Asked, Notices, FailedProposals, Retries, ToolCalls int
}

type runner struct {
	o     Options
	c     *agentsdk.Client
	stats Stats

	turn       int64 // open turn, 0 when none
	step       int64 // last step of the open turn
	stepOpen   bool
	prompt     string // the open turn's prompt, not yet recorded
	header     harness.EpochHeader
	res        agentsdk.Result
	turnFailed bool // the open turn's proposal failed: skip to the next turn
}

// Run executes the script (repeatedly with Loop) and returns what it did. It returns when the
// script is done, ctx ends (Loop), or an error the agent cannot continue past (log store or
// API unreachable, another writer in the log). A failed step proposal is not such an error: the
// turn ends with turn/end {blocked} and the script goes on.
func Run(ctx context.Context, o Options) (Stats, error) {
	if o.Client == nil {
		return Stats{}, errors.New("refagent: Options.Client is required")
	}
	if len(o.Script) == 0 {
		return Stats{}, errors.New("refagent: the script is empty")
	}
	if o.Model.Provider == "" {
		o.Model = harness.LLMCallConfig{Provider: "reference", Model: "scripted"}
	}
	if o.System == "" {
		o.System = DefaultSystem
	}
	r := &runner{o: o, c: o.Client}
	// A turn an earlier process left open (a crash) is closed as interrupted first.
	if closed, err := r.c.CloseInterrupted(ctx); err != nil {
		return r.stats, err
	} else if closed {
		o.Logger.Info("closed a turn an earlier run left open (turn/end interrupted)")
	}
	for {
		for _, op := range o.Script.atStart() {
			if err := r.do(ctx, op); err != nil {
				return r.stats, r.abort(ctx, err)
			}
		}
		if err := r.endTurn(ctx); err != nil {
			return r.stats, r.abort(ctx, err)
		}
		if !o.Loop && o.WaitForMessages {
			return r.stats, r.serveMessages(ctx)
		}
		if !o.Loop || ctx.Err() != nil {
			return r.stats, nil
		}
	}
}

// abort closes a turn left open when the run is cancelled (the agent is stopped): step/end
// for an open step, then turn/end {kind:'aborted', reason:{kind:'disposed'}}, so the log has
// no open turn and the manager commits a pending selection at once instead of waiting for a
// boundary that will not come. Other errors are returned as they are.
func (r *runner) abort(ctx context.Context, err error) error {
	if ctx.Err() == nil || r.turn == 0 || r.turnFailed {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if r.stepOpen {
		if e := r.c.EndStep(cctx, r.turn, r.step); e != nil {
			return errors.Join(err, e)
		}
		r.stepOpen = false
	}
	reason := harness.TurnEndReason{Kind: harness.TurnEndAborted, Reason: &harness.AbortCause{Kind: "disposed"}}
	if e := r.c.EndTurn(cctx, r.turn, reason); e != nil {
		return errors.Join(err, e)
	}
	r.turn = 0
	return err
}

func (r *runner) do(ctx context.Context, op Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch op.Kind {
	case OpTurn:
		if err := r.endTurn(ctx); err != nil {
			return err
		}
		turn, err := r.c.StartTurn(ctx)
		if err != nil {
			return err
		}
		r.turn, r.step, r.prompt, r.turnFailed = turn, 0, op.Arg, false
		r.stats.Turns++
		return nil
	case OpEnd:
		return r.endTurn(ctx)
	case OpSleep:
		if err := r.endStep(ctx); err != nil {
			return err
		}
		return sleep(ctx, op.Dur)
	}
	if r.turn == 0 || r.turnFailed {
		return nil // the turn's proposal failed (or there is none): skip to the next turn
	}
	switch op.Kind {
	case OpStep:
		return r.runStep(ctx, op.Arg)
	case OpRetry:
		// Same step, frozen assembly: the header is the step's own, so normally nothing is
		// logged, and no boundary runs, so no selection is applied.
		r.stats.Retries++
		_, err := r.c.LogRequest(ctx, r.header)
		return err
	case OpTool:
		return r.tool(ctx, op.Arg)
	case OpExit:
		return r.exit(ctx, op.Arg)
	case OpPresent:
		return r.present(ctx, op.Arg) // script.go
	}
	return fmt.Errorf("refagent: unknown op %q (line %d)", op.Kind, op.Line)
}

func (r *runner) runStep(ctx context.Context, steered string) error {
	if err := r.endStep(ctx); err != nil {
		return err
	}
	step := r.step + 1
	rec := StepRecord{Turn: r.turn, Step: step}
	var res agentsdk.Result
	var err error
	// A conflict at step/start means the log moved after the boundary decided: decide again.
	for attempt := 0; attempt < 3; attempt++ {
		start := time.Now()
		res, err = r.c.Boundary(ctx, r.turn, step, r.o.BoundaryTimeout)
		rec.Latency += time.Since(start)
		rec.Asked, rec.Unanswered, rec.Adopted = rec.Asked || res.Asked, rec.Unanswered || res.Unanswered, rec.Adopted || res.Adopted
		if err != nil {
			break
		}
		var msgs []harness.Event
		if step == 1 && r.prompt != "" {
			msgs = append(msgs, agentsdk.UserText(r.prompt))
		}
		if steered != "" {
			msgs = append(msgs, agentsdk.UserText(steered))
		}
		hdr := r.headerFor(res)
		err = r.c.StartStep(ctx, res, agentsdk.StepInput{Messages: msgs, Header: &hdr})
		if errors.Is(err, agentsdk.ErrLogChanged) {
			continue
		}
		if err != nil {
			return err
		}
		rec.HeaderLogged = r.headerChanged(hdr)
		r.header, r.res, r.step, r.stepOpen = hdr, res, step, true
		rec.Active, rec.Notice = res.Active, res.Notice
		break
	}
	if err == nil && !r.stepOpen {
		err = fmt.Errorf("%w: step/start kept conflicting", agentsdk.ErrLogChanged)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rec.Err = err
		r.stats.FailedProposals++
		r.report(rec)
		r.o.Logger.Info("step proposal failed; ending the turn", "turn", r.turn, "step", step, "error", err.Error())
		if endErr := r.c.EndTurn(ctx, r.turn, harness.TurnBlocked(err.Error())); endErr != nil {
			return endErr
		}
		r.turnFailed = true
		return nil
	}
	r.stats.Steps++
	if rec.Asked {
		r.stats.Asked++
	}
	if rec.Notice != "" {
		r.stats.Notices++
	}
	r.report(rec)
	return nil
}

// headerChanged tracks whether hdr differs from the previous step's header (what StartStep
// logged).
func (r *runner) headerChanged(hdr harness.EpochHeader) bool {
	a, _ := json.Marshal(hdr)
	b, _ := json.Marshal(r.header)
	return string(a) != string(b)
}

func (r *runner) report(rec StepRecord) {
	if r.o.OnStep != nil {
		r.o.OnStep(rec)
	}
}

func (r *runner) headerFor(res agentsdk.Result) harness.EpochHeader {
	return Header(res, r.o.Model, r.o.System)
}

// Header assembles a step's request header from its boundary result: the plan section rides
// in the system text (after the base prompt and a blank line) and exit_plan_mode is declared
// (first) only while plan mode is committed.
func Header(res agentsdk.Result, model harness.LLMCallConfig, system string) harness.EpochHeader {
	h := harness.EpochHeader{Config: model, System: system}
	if res.Active && res.Section != "" {
		h.System += "\n\n" + res.Section
	}
	if res.ExitAdmitted {
		h.Tools = append(h.Tools, harness.ExitToolSchema())
	}
	h.Tools = append(h.Tools, BaseTools...)
	return h
}

func (r *runner) tool(ctx context.Context, name string) error {
	if !r.stepOpen {
		return nil
	}
	r.stats.ToolCalls++
	callID := agentsdk.NewID()
	text, isErr := "ok", false
	if name == harness.ExitToolName && !r.res.ExitAdmitted {
		// Not declared in this step's request: the harness answers UNKNOWN_TOOL.
		text, isErr = "Error: UNKNOWN_TOOL: exit_plan_mode is only available in plan mode", true
	}
	_, err := r.c.Append(ctx,
		agentsdk.ToolCall(r.turn, r.step, callID, name, `{}`),
		agentsdk.ToolResult(r.turn, r.step, callID, name, text, isErr))
	return err
}

func (r *runner) endStep(ctx context.Context) error {
	if !r.stepOpen {
		return nil
	}
	if err := sleep(ctx, r.o.StepDelay); err != nil {
		return err
	}
	if err := r.c.EndStep(ctx, r.turn, r.step); err != nil {
		return err
	}
	r.stepOpen = false
	return nil
}

func (r *runner) endTurn(ctx context.Context) error {
	if r.turn == 0 {
		return nil
	}
	if !r.turnFailed {
		if r.step == 0 {
			// A turn with no step lines runs one step.
			if err := r.runStep(ctx, ""); err != nil {
				return err
			}
		}
		if !r.turnFailed {
			if err := r.endStep(ctx); err != nil {
				return err
			}
			if err := r.c.EndTurn(ctx, r.turn, harness.TurnCompleted); err != nil {
				return err
			}
		}
	}
	r.turn, r.step, r.turnFailed = 0, 0, false
	return nil
}

// serveMessages waits, idle, for user messages and runs one turn for each arrival: the first
// step records every message not recorded yet (StartStep), so none is lost or repeated. It
// returns nil when ctx ends.
func (r *runner) serveMessages(ctx context.Context) error {
	for {
		changed := r.c.MessagesChanged()
		if len(r.c.PendingMessages()) > 0 {
			if err := r.messageTurn(ctx); err != nil { // script.go
				return r.abortServing(ctx, err)
			}
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

func (r *runner) abortServing(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		_ = r.abort(ctx, err)
		return nil
	}
	return err
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
