package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// Event reasons (events.k8s.io).
const (
	EventReasonCommitted      = "Committed"
	EventReasonQueued         = "Queued"
	EventReasonCancelled      = "Cancelled"
	EventReasonAppendFailed   = "AppendFailed"
	EventReasonInvalidBound   = "InvalidBoundaryReport"
	EventReasonStoreError     = "LogStoreUnavailable"
	EventReasonForkSeeded     = "ForkSeeded"
	EventReasonForkRefused    = "ForkRefused"
	EventReasonConfigMissing  = "ConfigMissing"
	EventReasonReviewOpened   = "ReviewOpened"
	EventReasonReviewDecided  = "ReviewDecided"
	EventReasonReviewExpired  = "ReviewExpired"
	EventReasonReviewRejected = "ReviewRejected"
)

// agentSessionKind names the kind in the references the series Events carry.
const agentSessionKind = "AgentSession"

type event struct {
	typ, reason, action, note string
	// series: repeats aggregate into one Event (see emitEvents).
	series bool
}

func (sc *sessionScope) emit(typ, reason, action, note string) {
	sc.events = append(sc.events, event{typ: typ, reason: reason, action: action, note: note})
}

func (sc *sessionScope) emitSeries(typ, reason, action, note string) {
	sc.events = append(sc.events, event{typ: typ, reason: reason, action: action, note: note, series: true})
}

// emitEvents hands the reconcile's Events to the recorder, after the status write.
func (r *AgentSessionReconciler) emitEvents(sc *sessionScope) {
	for _, e := range sc.events {
		logEvent(eventLog, sc.session, e)
		r.event(sc.session, e)
	}
}

func (r *AgentSessionReconciler) event(s *agentsv1alpha1.AgentSession, e event) {
	if r.Recorder == nil {
		return
	}
	var regarding runtime.Object = s
	if e.series {
		// The frequent plan-mode transitions name the session without its resourceVersion, so
		// repeats of one (reason, action) join an events.k8s.io series (a count on one Event,
		// rewritten every few minutes at most) instead of costing an API write per toggle.
		// A reference, not an AgentSession: recorders keep it as it is, and in a storm many
		// wait in internal/eventqueue.
		regarding = &corev1.ObjectReference{APIVersion: agentsv1alpha1.GroupVersion.String(),
			Kind: agentSessionKind, Namespace: s.Namespace, Name: s.Name, UID: s.UID}
	}
	r.Recorder.Eventf(regarding, nil, e.typ, e.reason, e.action, "%s", e.note)
}

// transitionAction names the direction of a plan-mode transition event.
func transitionAction(active bool) string {
	if active {
		return "EnterPlanMode"
	}
	return "LeavePlanMode"
}

// The transition Events' notes, made once: the Event writer keeps each Event's note until its
// series ends, minutes after a storm, so a copy per Event would add up.
var (
	queuedNote    = newNotes("plan mode %s queued: applies at the agent's next step boundary")
	cancelledNote = newNotes("pending selection cancelled: the log already has plan mode %s")
	committedNote = newNotes("plan mode %s committed to the session log")
)

// notes holds a note for plan mode off and for on.
type notes [2]string

func newNotes(format string) notes {
	return notes{fmt.Sprintf(format, "off"), fmt.Sprintf(format, "on")}
}

func (n notes) of(active bool) string {
	if active {
		return n[1]
	}
	return n[0]
}
