package controllers

import (
	ctrl "sigs.k8s.io/controller-runtime"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/reviewpolicy"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// sessionScope is one reconcile's working state, handed from phase to phase.
type sessionScope struct {
	r *AgentSessionReconciler
	// session is the object the status is computed from.
	session *agentsv1alpha1.AgentSession
	// stored is status.planMode as read; never changed.
	stored agentsv1alpha1.PlanModeStatus
	// planMode is status.planMode being computed.
	planMode agentsv1alpha1.PlanModeStatus
	// tail is the session's log's tail, valid once logRead: read, and found to be the log the
	// status was recorded against.
	tail    harness.Tail
	logRead bool
	// forkSeedLength is how many events a fork seeded: plan/modes below it are inherited.
	forkSeedLength int64
	// sessionIsNewest: the session is known to be the API server's newest, so an append may
	// be decided on it (decideOnNewest).
	sessionIsNewest bool
	events          []event
	// rules are the namespace's ReviewPolicy rules, read once per reconcile (phase_review.go).
	rules *reviewpolicy.Rules
	// madeInTurn is the turn a held selection was made in when that turn has ended since
	// (pending_deferral.go); zero otherwise.
	madeInTurn int64
	// holdable: the only write due is taking on a user's selection made in the open turn,
	// which may be held for the agent's report (pending_deferral.go). Set by finish.
	holdable bool

	// Set by finish: the status to write, whether it differs from the stored one, the failure
	// that ended the phases, and when to look again.
	status  agentsv1alpha1.AgentSessionStatus
	changed bool
	stop    *failure
	result  ctrl.Result
}

func newScope(r *AgentSessionReconciler, s *agentsv1alpha1.AgentSession, newest bool) *sessionScope {
	return &sessionScope{r: r, session: s, stored: s.Status.PlanMode, planMode: *s.Status.PlanMode.DeepCopy(), sessionIsNewest: newest}
}

// state is the plan-mode state the decisions in pkg/planmode take.
func (sc *sessionScope) state() planmode.State {
	var p *planmode.Pending
	if sc.planMode.PendingActive != nil {
		p = &planmode.Pending{Active: *sc.planMode.PendingActive, Narrate: sc.planMode.PendingSource != agentsv1alpha1.PendingSourceExit}
	}
	return planmode.State{Logged: sc.tail.Active, Pending: p, TurnOpen: sc.tail.TurnOpen, LastShown: sc.tail.LastShown}
}

// setPending records the pending selection and the turn it was queued in: one queued while a
// turn is open waits for a step boundary (in that turn or a later one), never for the turn's end.
func (sc *sessionScope) setPending(p *planmode.Pending) {
	if p == nil {
		sc.planMode.PendingActive = nil
		sc.planMode.PendingSource = ""
		sc.planMode.QueuedInTurn = 0
		return
	}
	a := p.Active
	sc.planMode.PendingActive = &a
	sc.planMode.QueuedInTurn = 0
	if sc.tail.TurnOpen {
		sc.planMode.QueuedInTurn = sc.tail.Turn
	}
	if sc.madeInTurn != 0 {
		sc.planMode.QueuedInTurn = sc.madeInTurn
	}
	sc.planMode.PendingSource = agentsv1alpha1.PendingSourceUser
	if !p.Narrate {
		sc.planMode.PendingSource = agentsv1alpha1.PendingSourceExit
	}
}

// setOwedNotice records the narration of the plan/mode just appended (at tail.LastPlanModeSeq); an
// append without narration supersedes any earlier owed notice.
func (sc *sessionScope) setOwedNotice(text string) {
	if text == "" {
		sc.planMode.Notice = nil
		return
	}
	sc.planMode.Notice = &agentsv1alpha1.OwedNotice{Seq: sc.tail.LastPlanModeSeq, Text: text}
}

// entryWaitsForConfig reports that entering plan mode must wait: no PlanModeConfig is in force, so there
// is no guidance to render (readConfig).
func (sc *sessionScope) entryWaitsForConfig() bool { return sc.planMode.Config == nil }

// openTurn is the turn open in the log, 0 when none (or the log was not read).
func (sc *sessionScope) openTurn() int64 {
	if sc.logRead && sc.tail.TurnOpen {
		return sc.tail.Turn
	}
	return 0
}
