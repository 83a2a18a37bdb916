package controllers

import (
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// eventLog is where every Event of a reconcile is also written as an info line: transitions,
// review decisions and refusals show in the manager's log at the default level, also with
// --events off.
var eventLog = ctrl.Log.WithName("agentsession")

func logEvent(log logr.Logger, s *agentsv1alpha1.AgentSession, e event) {
	log.Info(e.note, "agentSession", klog.KObj(s), "reason", e.reason, "action", e.action, "type", e.typ)
}
