// Package refagent is the reference agent: it drives scripted turns and steps through the
// agent SDK against a real control plane and session log. cmd/refagent wraps it; tests and
// benchmarks run many of them in one process.
package refagent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// OpKind is one script instruction.
type OpKind string

const (
	// OpTurn opens a new turn (closing an open one as completed); Arg is the prompt, recorded
	// as the first step's user message.
	OpTurn OpKind = "turn"
	// OpStep runs one step of the open turn: boundary, step/start, input, request; Arg, when
	// set, is steered input recorded after the prompt.
	OpStep OpKind = "step"
	// OpRetry is a same-step request-recovery retry: another request with the step's frozen
	// assembly and no boundary (so no selection is applied).
	OpRetry OpKind = "retry"
	// OpTool records a tool call and its result in the current step; Arg is the tool name.
	OpTool OpKind = "tool"
	// OpEnd closes the open turn as completed.
	OpEnd OpKind = "end"
	// OpSleep pauses for Dur (between steps: a turn that stays open).
	OpSleep OpKind = "sleep"
	// OpPresent presents Arg as the plan, as OpExit does, but only in a step that declared
	// exit_plan_mode (plan mode is committed): a model never calls a tool it was not given.
	OpPresent OpKind = "present"
	// OpOnMessage starts the turn body run for each user message while the agent serves
	// messages (Options.WaitForMessages): the lines after it, with the messages as the first
	// step's input. The lines before it run once, at start.
	OpOnMessage OpKind = "on-message"
)

// Op is one parsed script line.
type Op struct {
	Kind OpKind
	Arg  string
	Dur  time.Duration
	Line int
}

// Script is a parsed script.
type Script []Op

// ParseScript reads one instruction per line:
//
//	turn [prompt]      open a turn (its first step records the prompt)
//	step [text]        run one step; text is steered input for that step
//	retry              a request-recovery retry of the current step (no boundary)
//	tool NAME [args]   a tool/call and its tool/result in the current step
//	exit PLAN          exit_plan_mode with PLAN ("\n" for line breaks); waits for the review
//	present PLAN       exit PLAN, only when the step declared the tool (plan mode is on)
//	sleep DURATION     pause, e.g. "sleep 500ms"
//	end                end the open turn (completed)
//	on-message         the lines after it are the turn run for each user message
//
// Blank lines and lines starting with # are ignored. A turn with no step lines runs one step.
// After on-message no line opens a turn (the message does) and the turn ends with the lines.
func ParseScript(r io.Reader) (Script, error) {
	var out Script
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		op, err := parseOp(line, n)
		if err != nil {
			return nil, err
		}
		if err := checkPlace(out, op); err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("script is empty: it needs at least one \"turn\"")
	}
	return out, nil
}

// parseOp parses instruction line n and checks its argument.
func parseOp(line string, n int) (Op, error) {
	word, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	op := Op{Kind: OpKind(word), Arg: arg, Line: n}
	switch op.Kind {
	case OpTurn, OpStep:
	case OpRetry, OpEnd:
		if arg != "" {
			return Op{}, fmt.Errorf("script line %d: %q takes no argument (got %q)", n, word, arg)
		}
	case OpOnMessage:
		if arg != "" {
			return Op{}, fmt.Errorf("script line %d: on-message takes no argument (got %q); the lines after it are the turn for each message", n, arg)
		}
	case OpTool:
		if arg == "" {
			return Op{}, fmt.Errorf("script line %d: tool needs a name, e.g. \"tool read\"", n)
		}
	case OpSleep:
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 {
			return Op{}, fmt.Errorf("script line %d: sleep needs a duration such as 200ms or 2s (got %q)", n, arg)
		}
		op.Dur = d
	case OpExit, OpPresent:
		if arg == "" {
			return Op{}, fmt.Errorf("script line %d: %s needs the plan, e.g. \"%s # Fix the flake\\n\\n1. Add the lock\"", n, word, word)
		}
	default:
		return Op{}, fmt.Errorf("script line %d: unknown instruction %q; use turn, step, retry, tool, exit, present, sleep, end or on-message", n, word)
	}
	return op, nil
}

// checkPlace refuses op where it cannot run after the lines in s.
func checkPlace(s Script, op Op) error {
	perMessage := slices.ContainsFunc(s, func(o Op) bool { return o.Kind == OpOnMessage })
	switch op.Kind {
	case OpOnMessage:
		if perMessage {
			return fmt.Errorf("script line %d: a second on-message; one turn body serves every message", op.Line)
		}
		if hasTurnBefore(s) {
			return fmt.Errorf("script line %d: on-message inside an open turn: end it first", op.Line)
		}
	case OpTurn, OpEnd:
		if perMessage {
			return fmt.Errorf("script line %d: %q after on-message: the message opens the turn, and it ends with the script", op.Line, op.Kind)
		}
	case OpStep, OpRetry, OpTool, OpExit, OpPresent:
		if !hasTurnBefore(s) {
			return fmt.Errorf("script line %d: %q before any \"turn\"", op.Line, op.Kind)
		}
		if op.Kind != OpStep && !hasStepBefore(s) {
			return fmt.Errorf("script line %d: %q needs a \"step\" of the turn before it", op.Line, op.Kind)
		}
	}
	return nil
}

// hasTurnBefore: a turn is open after s (a message's turn after on-message).
func hasTurnBefore(s Script) bool {
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i].Kind {
		case OpTurn, OpOnMessage:
			return true
		case OpEnd:
			return false
		}
	}
	return false
}

func hasStepBefore(s Script) bool {
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i].Kind {
		case OpStep:
			return true
		case OpTurn, OpEnd, OpOnMessage:
			return false
		}
	}
	return false
}

// atStart is the part of the script run once, at start: the lines before on-message.
func (s Script) atStart() Script {
	if i := slices.IndexFunc(s, func(o Op) bool { return o.Kind == OpOnMessage }); i >= 0 {
		return s[:i]
	}
	return s
}

// perMessage is the turn body run for each user message: the lines after on-message, or,
// without it, one step.
func (s Script) perMessage() Script {
	if i := slices.IndexFunc(s, func(o Op) bool { return o.Kind == OpOnMessage }); i >= 0 {
		return s[i+1:]
	}
	return Script{{Kind: OpStep}}
}

// messageTurn runs the turn for the user messages waiting: a turn whose first step records
// them, then the per-message lines.
func (r *runner) messageTurn(ctx context.Context) error {
	if err := r.do(ctx, Op{Kind: OpTurn}); err != nil {
		return err
	}
	body := r.o.Script.perMessage()
	if len(body) == 0 || body[0].Kind != OpStep {
		body = append(Script{{Kind: OpStep}}, body...) // the messages are a step's input
	}
	for _, op := range body {
		if err := r.do(ctx, op); err != nil {
			return err
		}
	}
	return r.endTurn(ctx)
}

// present is exit_plan_mode for a step that declared it; nothing otherwise.
func (r *runner) present(ctx context.Context, plan string) error {
	if !r.stepOpen || !r.res.ExitAdmitted {
		return nil
	}
	return r.exit(ctx, plan)
}

// Generate is the script of --turns/--steps: each turn has a prompt and `steps` steps.
func Generate(turns, steps int) Script {
	var s Script
	for t := 1; t <= turns; t++ {
		s = append(s, Op{Kind: OpTurn, Arg: "task " + strconv.Itoa(t)})
		for i := 0; i < steps; i++ {
			s = append(s, Op{Kind: OpStep})
		}
		s = append(s, Op{Kind: OpEnd})
	}
	return s
}
