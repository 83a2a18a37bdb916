package controllers

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// Every Event is also an info line (verbosity 0) naming the session, its reason and action.
func TestLogEventIsAnInfoLine(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{Verbosity: 0})
	s := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo"}}
	logEvent(log, s, event{typ: corev1.EventTypeNormal, reason: EventReasonCommitted, action: transitionAction(true), note: committedNote(true)})
	logEvent(log, s, event{typ: corev1.EventTypeWarning, reason: EventReasonReviewRejected, action: "Review", note: "refused"})
	if len(lines) != 2 {
		t.Fatalf("%d lines logged, want 2: %q", len(lines), lines)
	}
	for _, want := range []string{`"reason"="Committed"`, `"action"="EnterPlanMode"`, `"agentSession"={"name"="demo" "namespace"="team-a"}`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("transition line %q lacks %s", lines[0], want)
		}
	}
	if !strings.Contains(lines[1], `"reason"="ReviewRejected"`) || !strings.Contains(lines[1], `"type"="Warning"`) {
		t.Errorf("refusal line: %q", lines[1])
	}
}
