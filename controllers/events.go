package controllers

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// The reconciler's Events: what a person needs to know about a session, each also written to
// the manager's log as an info line (so it shows with --events off too). They are handed to the
// events.k8s.io recorder (AgentSessionReconciler.Recorder: cmd/manager's internal/eventsink)
// after the reconcile's status write: a committed transition, a plan review opened, decided,
// expired or refused, and a failure that needs a person (a Warning with Ready's reason,
// recorded once when Ready first shows it: warnOnce in conditions.go). No Event is recorded
// for a selection queued or cancelled, a step boundary answered, or any other step the status
// already shows.
const (
	EventReasonCommitted             = "Committed"
	EventReasonReviewOpened          = "ReviewOpened"
	EventReasonReviewDecided         = "ReviewDecided"
	EventReasonReviewExpired         = "ReviewExpired"
	EventReasonReviewRejected        = "ReviewRejected"
	EventReasonReviewDecisionRefused = "ReviewDecisionRefused"
)

// The kind the series Events' references name, and the actions of a transition.
const (
	agentSessionKind = "AgentSession"
	eventActionEnter = "EnterPlanMode"
	eventActionLeave = "LeavePlanMode"
)

// event is one Event a reconcile records.
type event struct {
	typ, reason, action, note string
	// series: repeats of the same (reason, action) about the session join one events.k8s.io
	// series (a count on one Event) instead of costing a write each.
	series bool
}

func (sc *sessionScope) emit(typ, reason, action, note string) {
	sc.events = append(sc.events, event{typ: typ, reason: reason, action: action, note: note})
}

func (sc *sessionScope) emitSeries(typ, reason, action, note string) {
	sc.events = append(sc.events, event{typ: typ, reason: reason, action: action, note: note, series: true})
}

// eventLog is the manager's log of the Events.
var eventLog = ctrl.Log.WithName("agentsession")

// recordEvents logs the reconcile's Events and hands them to the recorder, after the status
// write: the acknowledgement an agent waits for does not queue behind them.
func (r *AgentSessionReconciler) recordEvents(sc *sessionScope) {
	for _, e := range sc.events {
		logEvent(eventLog, sc.session, e)
		if r.Recorder == nil {
			continue
		}
		var regarding runtime.Object = sc.session
		if e.series {
			// Without its resourceVersion, so that repeats are the same Event to the recorder.
			s := sc.session
			regarding = &corev1.ObjectReference{APIVersion: agentsv1alpha1.GroupVersion.String(),
				Kind: agentSessionKind, Namespace: s.Namespace, Name: s.Name, UID: s.UID}
		}
		r.Recorder.Eventf(regarding, nil, e.typ, e.reason, e.action, "%s", e.note)
	}
}

// logEvent writes an Event's line: at the default level, naming the session.
func logEvent(log logr.Logger, s *agentsv1alpha1.AgentSession, e event) {
	log.Info(e.note, "agentSession", klog.KObj(s), "reason", e.reason, "action", e.action, "type", e.typ)
}

// transitionAction names the direction of a plan-mode transition.
func transitionAction(active bool) string {
	if active {
		return eventActionEnter
	}
	return eventActionLeave
}

// committedNote is the note of a Committed Event.
func committedNote(active bool) string {
	if active {
		return "plan mode on committed to the session log"
	}
	return "plan mode off committed to the session log"
}
