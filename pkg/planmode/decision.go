// Package planmode holds the harness's plan-mode decisions as pure functions, with no
// Kubernetes and no I/O: what a selection does (Set), what a step boundary does with a pending
// selection (Flush: commit before the step's request is built; a failed append fails the
// proposal), when a switch is narrated (Narration), and the checks on a proposed plan. It
// decides on the harness's vocabulary (pkg/harness); the reconciler, the agent SDK and the
// kubectl plugin all decide through it.
package planmode

import (
	"regexp"
	"strings"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// Outcome is what set() did (the harness's 'committed' | 'queued' | 'cancelled' | 'noop').
type Outcome string

const (
	// Committed means logged now (between turns).
	Committed Outcome = "committed"
	// Queued means the selection awaits the next step boundary.
	Queued Outcome = "queued"
	// Cancelled means an opposite pending selection was cleared (or, during a turn, overwritten by
	// one equal to the logged state); the logged state already matches.
	Cancelled Outcome = "cancelled"
	// Noop means already in that state (logged, or already pending).
	Noop Outcome = "noop"
)

// Pending is a selection awaiting a step boundary. Active is the target, not a flag: a pending
// equal to the logged state is reachable (the "cancelled residue" an opposite selection
// leaves during a turn).
type Pending struct {
	Active bool
	// Narrate is true for user selections and false for an approved exit_plan_mode.
	Narrate bool
}

// State is what a plan-mode decision reads.
type State struct {
	// Logged is the committed state: the fold of the log.
	Logged bool
	// Pending is the selection awaiting a boundary, nil when none.
	Pending *Pending
	// TurnOpen: the last turn/start has no turn/end after it.
	TurnOpen bool
	// LastShown is the logged state in force at the last request/header; nil when there is none.
	LastShown *bool
}

// Target is the logged-or-already-pending state (the harness's set() target).
func (s State) Target() bool {
	if s.Pending != nil {
		return s.Pending.Active
	}
	return s.Logged
}

// IsPending is the client-facing "pending" flag: a selection waits that differs from the log.
func (s State) IsPending() bool {
	return s.Pending != nil && s.Pending.Active != s.Logged
}

// SetDecision is the result of a set(x) call.
type SetDecision struct {
	Outcome Outcome
	// Append is non-nil when plan/mode{*Append} must be appended now (Committed only). The new
	// Pending applies only once that append succeeded; on failure the old pending is kept.
	Append *bool
	// Pending is the pending selection after the call (nil: none).
	Pending *Pending
	// Notice is the narration owed by a committed selection ("" when none). Between turns it
	// is delivered in the first admitted step of the next turn.
	Notice string
}

// Set is the harness's set(agent, x) decision table. It never appends itself: the caller
// appends Append (compare-and-swap) and keeps the old state if that fails.
func Set(s State, x bool) SetDecision {
	if x == s.Target() {
		return SetDecision{Outcome: Noop, Pending: clonePending(s.Pending)}
	}
	if s.TurnOpen {
		// Stored even when x equals the logged state (the kept "cancelled residue").
		p := &Pending{Active: x, Narrate: true}
		if x == s.Logged {
			return SetDecision{Outcome: Cancelled, Pending: p}
		}
		return SetDecision{Outcome: Queued, Pending: p}
	}
	if x == s.Logged {
		return SetDecision{Outcome: Cancelled}
	}
	return SetDecision{Outcome: Committed, Append: &x, Notice: Narration(s.LastShown, x)}
}

// FlushDecision is what a step boundary does with the pending selection.
type FlushDecision struct {
	// Append is non-nil when plan/mode{*Append} must be appended before the step's request
	// is built. If the append fails the proposal fails and the pending selection is kept.
	Append *bool
	// ClearPending: the pending selection is settled (after a successful append, or net-zero).
	ClearPending bool
	// Notice is the text the admitted step records as its last user/message ("" when none).
	Notice string
	// Active is the committed state the step uses once the decision has been carried out.
	Active bool
}

// Flush is the step-boundary decision for an accepted step proposal: the pending selection is
// committed before the step's request is built.
//
// A net-zero pending selection (toggled back to the logged state) appends nothing and
// narrates nothing: only an appended user selection is narrated. An older harness release
// still narrated when the last header described the other state; with the reconciler that can
// arise only after an approved exit, since a between-turns commit hands its notice to the
// next step.
func Flush(s State) FlushDecision {
	if s.Pending == nil {
		return FlushDecision{Active: s.Logged}
	}
	if s.Pending.Active == s.Logged {
		return FlushDecision{ClearPending: true, Active: s.Logged}
	}
	a := s.Pending.Active
	d := FlushDecision{Append: &a, ClearPending: true, Active: a}
	if s.Pending.Narrate {
		// Computed before the append; the append does not move the last header anyway.
		d.Notice = Narration(s.LastShown, a)
	}
	return d
}

// Narration is the notice for a selection of target that reached the log: none before the
// first request/header (the system section itself states the mode), otherwise one iff the
// last header described the other state.
func Narration(told *bool, target bool) string {
	if told == nil || *told == target {
		return ""
	}
	return harness.NoticeText(target)
}

// OnOff names a plan state in messages: "on" or "off".
func OnOff(active bool) string {
	if active {
		return "on"
	}
	return "off"
}

func clonePending(p *Pending) *Pending {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

var planHeading = regexp.MustCompile(`^#\s+\S`)

// ValidPlan reports whether plan is the complete markdown plan exit_plan_mode accepts: after
// trimming, it starts with a level-1 "# " heading ("## X" fails).
func ValidPlan(plan string) bool {
	return planHeading.MatchString(strings.TrimSpace(plan))
}

var anyHeading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)

// PlanTitle is the review card title: the plan's first heading of any level, else "Plan".
func PlanTitle(plan string) string {
	if m := anyHeading.FindStringSubmatch(plan); m != nil {
		return m[1]
	}
	return harness.ReviewDefaultTitle
}
