package plancli

import (
	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// StateOf reads the state set() sees from an AgentSession: the manager's status, plus the
// user's selection in spec when the manager has not taken it on yet (status.planMode.selection
// differs), applied through the same decision table first, because the manager applies it
// before ours.
func StateOf(as *v1alpha1.AgentSession) planmode.State {
	return stateOf(as, nil)
}

// stateOf is StateOf with the committed state and the open turn read from the log's tail when
// it is known (the status's copy lags while the agent runs steps that need no API write).
func stateOf(as *v1alpha1.AgentSession, live *harness.Tail) planmode.State {
	pm := as.Status.PlanMode
	s := planmode.State{Logged: pm.Active, TurnOpen: pm.TurnOpen, LastShown: pm.ToldActive}
	if live != nil {
		s.Logged, s.TurnOpen, s.LastShown = live.Active, live.TurnOpen, live.LastShown
	}
	if pm.PendingActive != nil {
		s.Pending = &planmode.Pending{Active: *pm.PendingActive, Narrate: pm.PendingSource != v1alpha1.PendingSourceExit}
	}
	if want := as.Spec.PlanMode.Active; want != nil && !sameBool(want, pm.Selection) {
		s = apply(s, planmode.Set(s, *want))
	}
	return s
}

// apply is the state after a set() decision has been carried out (its append succeeded).
func apply(s planmode.State, d planmode.SetDecision) planmode.State {
	if d.Append != nil {
		s.Logged = *d.Append
	}
	s.Pending = d.Pending
	return s
}

// Decide is set(x) on the state, and the /plan reply for it.
func Decide(s planmode.State, x bool) (planmode.Outcome, string) {
	d := planmode.Set(s, x)
	return d.Outcome, planmode.PlanCommandReply(!x, d.Outcome, s.Logged)
}

func sameBool(a, b *bool) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
