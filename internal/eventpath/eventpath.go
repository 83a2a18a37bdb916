// Package eventpath wires the manager's Events the one way cmd/manager runs them: an
// events.k8s.io Sink (internal/eventsink) with a bounded number of writers. The reconciler puts
// its own queue in front of it (AgentSessionReconciler.EventMaxHold). cmd/manager and the
// boundary benchmark (test/bench) both build it here, so the benchmark measures the Event
// writes the manager makes.
package eventpath

import (
	"context"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/harness-dev/planmode-operator/internal/eventsink"
)

// Options of the path.
type Options struct {
	// Controller is the reporting controller; the instance is Controller-<hostname>.
	Controller string
	Log        logr.Logger
}

// Path is a running Event path.
type Path struct {
	// Sink writes the Events; its Collectors are the Event metrics.
	Sink *eventsink.Sink

	stop context.CancelFunc
	done chan struct{}
}

// Start builds the Sink on mgr's config and HTTP client and starts it. The Sink outlives ctx:
// call Stop after mgr.Start has returned, so the Events the reconciler's queue hands on as it
// stops are still written (for at most eventsink.Options.DrainFor).
func Start(ctx context.Context, mgr manager.Manager, o Options) (*Path, error) {
	events, err := eventsv1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("make the events.k8s.io client: %w", err)
	}
	hostname, _ := os.Hostname()
	sink := eventsink.New(events, mgr.GetScheme(), o.Controller, o.Controller+"-"+hostname, o.Log, eventsink.Options{})
	p := &Path{Sink: sink}
	sinkCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stop, p.done = stop, make(chan struct{})
	go func() { defer close(p.done); sink.Run(sinkCtx) }()
	return p, nil
}

// Stop drains the Sink and waits for it to return.
func (p *Path) Stop() {
	p.stop()
	<-p.done
}
