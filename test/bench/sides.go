package main

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk/floor"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// sides are the controllers measured, floor first (ratios are manager/floor).
func sides() []side {
	return []side{
		{
			name: "floor",
			start: func(mgr ctrl.Manager, store sessionlog.Store) error {
				return (&floor.Reconciler{Client: mgr.GetClient(), Store: store, Options: controllerOptions()}).SetupWithManager(mgr)
			},
			// The floor appends nothing: it only takes the selection on.
			committed: func(s *v1alpha1.AgentSession, _ sessionlog.Tail, want bool) bool {
				sel := s.Status.PlanMode.Selection
				return sel != nil && *sel == want
			},
		},
	}
}

// workers is the MaxConcurrentReconciles both sides get (-workers).
var workers = 4

func controllerOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: workers}
}
