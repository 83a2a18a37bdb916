package main

import (
	"context"

	"github.com/go-logr/logr"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/controllers"
	"github.com/harness-dev/planmode-operator/internal/eventsink"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/test/framework/floor"
)

// sides are the controllers measured, floor first (ratios are to the floor).
func sides() []side {
	out := []side{
		{
			name: "floor",
			start: func(_ context.Context, mgr ctrl.Manager, store sessionlog.Store) (func(), error) {
				return func() {}, (&floor.Reconciler{Client: mgr.GetClient(), Store: store, Options: controllerOptions()}).SetupWithManager(mgr)
			},
			ready: func(*v1alpha1.AgentSession) bool { return true }, // it writes nothing up front
			// The floor appends nothing: it only takes the selection on.
			committed: func(s *v1alpha1.AgentSession, _ harness.Tail, want bool) bool {
				sel := s.Status.PlanMode.Selection
				return sel != nil && *sel == want
			},
			// It marks the selection pending at once, and its count of writes assumes it did
			// before the boundary.
			awaits: framework.SelectionPending,
		},
	}
	switch managerEvents {
	case eventsOn, eventsBoth:
		out = append(out, managerSide("manager", true))
	}
	switch managerEvents {
	case eventsOff, eventsBoth:
		out = append(out, managerSide("manager-no-events", false))
	}
	return out
}

// managerSide is the real reconciler wired as cmd/manager wires it, with its --events on (its
// Event writer, internal/eventsink) or off.
func managerSide(name string, events bool) side {
	return side{
		name: name,
		start: func(ctx context.Context, mgr ctrl.Manager, store sessionlog.Store) (func(), error) {
			r := &controllers.AgentSessionReconciler{Client: mgr.GetClient(), Store: store, PendingStatusDelay: controllers.DefaultPendingStatusDelay}
			stop := func() {}
			if events {
				sink, stopSink, err := eventsink.Start(ctx, mgr, controllers.FieldManager, logr.Discard(), eventsink.Options{HoldWhile: r.Behind})
				if err != nil {
					return nil, err
				}
				r.Recorder, stop = sink, stopSink
			}
			if err := r.SetupWithManager(mgr, controllerOptions()); err != nil {
				stop()
				return nil, err
			}
			return stop, nil
		},
		ready: func(s *v1alpha1.AgentSession) bool {
			return s.Status.PlanMode.Config != nil && s.Status.ObservedGeneration == s.Generation
		},
		committed: func(s *v1alpha1.AgentSession, t harness.Tail, want bool) bool {
			return t.Active == want && s.Status.PlanMode.Active == want && !s.Status.PlanMode.Pending
		},
		// The agent asks when the status has not taken the selection on (it holds that write
		// for the agent's report, as cmd/manager does by default) or marks it pending.
		awaits: framework.SelectionWaits,
	}
}

// workers is the MaxConcurrentReconciles both sides get (-workers); cmd/manager's default.
var workers = 8

// The values of -manager-events: which manager configurations are measured.
const (
	eventsOn   = "on"   // cmd/manager's default, --events=on
	eventsOff  = "off"  // --events=off
	eventsBoth = "both" // one side each
)

// managerEvents selects the manager configurations (-manager-events).
var managerEvents = eventsBoth

func controllerOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: workers}
}
