package eventsink

import (
	"context"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Start makes a Sink on mgr's config, HTTP client and scheme, reporting as controller (instance
// controller-<hostname>, as client-go names it), and starts its writers. The Sink outlives
// ctx: call stop once mgr.Start has returned, so that the Events recorded as the reconcilers
// stop are written too (for at most Options.DrainFor).
func Start(ctx context.Context, mgr manager.Manager, controller string, log logr.Logger, opts Options) (s *Sink, stop func(), err error) {
	events, err := eventsv1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, nil, fmt.Errorf("make the events.k8s.io client: %w", err)
	}
	hostname, _ := os.Hostname()
	s = New(events, mgr.GetScheme(), controller, controller+"-"+hostname, log, opts)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); s.Run(runCtx) }()
	return s, func() { cancel(); <-done }, nil
}
