package main

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/controllers"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework/floor"
)

// sides are the controllers measured, floor first (ratios are to the floor).
func sides() []side {
	out := []side{
		{
			name: "floor",
			start: func(mgr ctrl.Manager, store sessionlog.Store) error {
				return (&floor.Reconciler{Client: mgr.GetClient(), Store: store, Options: controllerOptions()}).SetupWithManager(mgr)
			},
			ready: func(*v1alpha1.AgentSession) bool { return true }, // it writes nothing up front
			// The floor appends nothing: it only takes the selection on.
			committed: func(s *v1alpha1.AgentSession, _ sessionlog.Tail, want bool) bool {
				sel := s.Status.PlanMode.Selection
				return sel != nil && *sel == want
			},
		},
	}
	switch managerEvents {
	case "on", "both":
		out = append(out, managerSide("manager", true))
	}
	switch managerEvents {
	case "off", "both":
		out = append(out, managerSide("manager-no-events", false))
	}
	return out
}

// managerSide is the real reconciler wired as cmd/manager does (default pending poll), with
// cmd/manager's --events on or off.
func managerSide(name string, events bool) side {
	return side{
		name: name,
		start: func(mgr ctrl.Manager, store sessionlog.Store) error {
			r := &controllers.AgentSessionReconciler{Client: mgr.GetClient(), Store: store}
			if events {
				r.Recorder = mgr.GetEventRecorder(controllers.FieldManager)
			}
			return r.SetupWithManager(mgr, controllerOptions())
		},
		ready: func(s *v1alpha1.AgentSession) bool {
			return s.Status.PlanMode.Config != nil && s.Status.ObservedGeneration == s.Generation
		},
		committed: func(s *v1alpha1.AgentSession, t sessionlog.Tail, want bool) bool {
			return t.Active == want && s.Status.PlanMode.Active == want && !s.Status.PlanMode.Pending
		},
	}
}

// workers is the MaxConcurrentReconciles both sides get (-workers); cmd/manager's default.
var workers = 8

// managerEvents selects the manager configurations (-manager-events): "on" (cmd/manager's
// default), "off" (--events=off), or "both".
var managerEvents = "both"

func controllerOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: workers}
}
