// Package refagent is the reference agent: it drives scripted turns and steps through the
// agent SDK against a real control plane and session log. cmd/refagent wraps it; tests and
// benchmarks run many of them in one process.
package refagent

import (
	"bufio"
	"fmt"
	"io"
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
//	sleep DURATION     pause, e.g. "sleep 500ms"
//	end                end the open turn (completed)
//
// Blank lines and lines starting with # are ignored. A turn with no step lines runs one step.
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
		if (op.Kind == OpStep || op.Kind == OpRetry || op.Kind == OpTool || op.Kind == OpExit) && !hasTurnBefore(out) {
			return nil, fmt.Errorf("script line %d: %q before any \"turn\"", n, op.Kind)
		}
		if (op.Kind == OpRetry || op.Kind == OpTool || op.Kind == OpExit) && !hasStepBefore(out) {
			return nil, fmt.Errorf("script line %d: %q needs a \"step\" of the turn before it", n, op.Kind)
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
	case OpExit:
		if arg == "" {
			return Op{}, fmt.Errorf("script line %d: exit needs the plan, e.g. \"exit # Fix the flake\\n\\n1. Add the lock\"", n)
		}
	default:
		return Op{}, fmt.Errorf("script line %d: unknown instruction %q; use turn, step, retry, tool, exit, sleep or end", n, word)
	}
	return op, nil
}

func hasTurnBefore(s Script) bool {
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i].Kind {
		case OpTurn:
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
		case OpTurn, OpEnd:
			return false
		}
	}
	return false
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
