package framework

import (
	"context"
	"encoding/json"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/refagent"
)

// StepBoundaryTimeout bounds a StepAgent's wait at a step boundary (a plan-mode change the
// manager has yet to deliver).
const StepBoundaryTimeout = 20 * time.Second

// StepAgent drives one session's turns and steps through the real agent SDK, building each
// step's request header as the reference agent does, so the manager and kubectl plan see what
// a real agent would write. A test calls StartTurn, NextStep (as often as it likes), EndTurn;
// any SDK error fails t.
type StepAgent struct {
	Client     *agentsdk.Client
	Turn, Step int64
	ctx        context.Context
	t          TB
	stepOpen   bool
}

// NewStepAgent drives the session c is connected to; ctx bounds every call.
func NewStepAgent(ctx context.Context, t TB, c *agentsdk.Client) *StepAgent {
	return &StepAgent{Client: c, ctx: ctx, t: t}
}

// StartTurn starts a turn; its first step starts with NextStep.
func (a *StepAgent) StartTurn() {
	a.t.Helper()
	t, err := a.Client.StartTurn(a.ctx)
	if err != nil {
		a.t.Fatalf("start a turn: %v", err)
	}
	a.Turn, a.Step = t, 0
}

// NextStep ends the open step, runs the step boundary and starts the next step with the user
// inputs (none: a step that continues the turn) and the request header the boundary result
// implies. It returns that result.
func (a *StepAgent) NextStep(input ...string) agentsdk.Result {
	a.t.Helper()
	a.EndStep()
	res, err := a.Client.Boundary(a.ctx, a.Turn, a.Step+1, StepBoundaryTimeout)
	if err != nil {
		a.t.Fatalf("step boundary before turn %d step %d: %v", a.Turn, a.Step+1, err)
	}
	msgs := make([]harness.Event, 0, len(input))
	for _, in := range input {
		msgs = append(msgs, agentsdk.UserText(in))
	}
	hdr := refagent.Header(res, harness.LLMCallConfig{Provider: "reference", Model: "scripted"}, refagent.DefaultSystem)
	if err := a.Client.StartStep(a.ctx, res, agentsdk.StepInput{Messages: msgs, Header: &hdr}); err != nil {
		a.t.Fatalf("start turn %d step %d: %v", a.Turn, a.Step+1, err)
	}
	a.Step, a.stepOpen = a.Step+1, true
	return res
}

// EndStep ends the open step, if there is one.
func (a *StepAgent) EndStep() {
	a.t.Helper()
	if a.stepOpen {
		if err := a.Client.EndStep(a.ctx, a.Turn, a.Step); err != nil {
			a.t.Fatalf("end turn %d step %d: %v", a.Turn, a.Step, err)
		}
		a.stepOpen = false
	}
}

// EndTurn ends the open step and completes the turn.
func (a *StepAgent) EndTurn() {
	a.t.Helper()
	a.EndStep()
	if err := a.Client.EndTurn(a.ctx, a.Turn, harness.TurnCompleted); err != nil {
		a.t.Fatalf("end turn %d: %v", a.Turn, err)
	}
}

// ExitTimeout bounds a CallExit's wait for the review's outcome.
const ExitTimeout = time.Minute

// ExitCall is one exit_plan_mode call's outcome. Logged is the error of recording the call in
// the session log (nil: recorded); a suite checks it where it receives the call.
type ExitCall struct {
	Result agentsdk.ExitResult
	Err    error
	Logged error
}

// CallExit starts exit_plan_mode with plan in the open step. When it returns, the call is
// recorded in the log as agents record it, the plan as its arguments (kubectl plan review
// --diff reads it there), and its outcome arrives on the channel.
func (a *StepAgent) CallExit(plan string) <-chan ExitCall {
	ch := make(chan ExitCall, 1)
	turn, step := a.Turn, a.Step
	go func() {
		res, err := a.Client.ExitPlanMode(a.ctx, plan, ExitTimeout)
		args, logged := json.Marshal(map[string]string{"plan": plan})
		if logged == nil {
			var evs []harness.Event
			if evs, logged = agentsdk.ExitToolEvents(turn, step, agentsdk.NewID(), string(args), res, err); logged == nil {
				_, logged = a.Client.Append(a.ctx, evs...)
			}
		}
		ch <- ExitCall{Result: res, Err: err, Logged: logged}
	}()
	return ch
}
