package framework

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// ManagerOptions says what StartManager runs. The package does not import the reconciler or
// the webhooks (their own tests use it too): Setup registers them.
type ManagerOptions struct {
	Scheme *runtime.Scheme
	// Setup registers what the manager runs: the AgentSession reconciler, the webhooks.
	Setup func(ctrl.Manager) error
	// Namespace, when set, limits the manager's cache to it (one manager per namespace, as a
	// suite's specs run side by side); leader election's Lease lives there too.
	Namespace string
	// WebhookServer, when set, serves the admission webhooks; StartManager returns once it has
	// started, when admission is in force.
	WebhookServer webhook.Server
	// LeaderElectionID, when set, elects a leader with leases of a few seconds.
	LeaderElectionID string
	// Tune adjusts the manager's options last (a counting client, the cache's transform).
	Tune func(*ctrl.Options)
}

// Manager is a running controller-runtime manager.
type Manager struct {
	ctrl.Manager
	cancel  context.CancelFunc
	done    chan error
	stopped bool
	err     error
}

// StartManager builds a manager on cfg as the suites and benchmarks run one (no metrics or
// probe endpoints, controller names not checked for uniqueness across the suite's managers),
// runs o.Setup on it and starts it until ctx ends or Stop. On error nothing is left running.
func StartManager(ctx context.Context, cfg *rest.Config, o ManagerOptions) (*Manager, error) {
	opts := ctrl.Options{
		Scheme:                 o.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		WebhookServer:          o.WebhookServer,
	}
	if o.Namespace != "" {
		opts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}}
	}
	if o.LeaderElectionID != "" {
		opts.LeaderElection = true
		opts.LeaderElectionID = o.LeaderElectionID
		opts.LeaderElectionNamespace = o.Namespace
		opts.LeaderElectionReleaseOnCancel = true
		opts.LeaseDuration = ptr.To(3 * time.Second)
		opts.RenewDeadline = ptr.To(2 * time.Second)
		opts.RetryPeriod = ptr.To(200 * time.Millisecond)
	}
	if o.Tune != nil {
		o.Tune(&opts)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("create the manager: %w", err)
	}
	if o.Setup != nil {
		if err := o.Setup(mgr); err != nil {
			return nil, err
		}
	}
	mctx, cancel := context.WithCancel(ctx)
	m := &Manager{Manager: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(mctx) }()
	if o.WebhookServer != nil {
		started := func(context.Context) (bool, error) {
			select {
			case err := <-m.done:
				m.done <- err
				return false, fmt.Errorf("the manager stopped before its webhook server started: %w", err)
			default:
			}
			return o.WebhookServer.StartedChecker()(nil) == nil, nil
		}
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, started); err != nil {
			_ = m.Stop()
			return nil, fmt.Errorf("the webhook server did not start: %w", err)
		}
	}
	return m, nil
}

// Stop stops the manager and returns what its Start returned; calling it again returns the same.
func (m *Manager) Stop() error {
	if !m.stopped {
		m.stopped = true
		m.cancel()
		m.err = <-m.done
		if errors.Is(m.err, context.Canceled) {
			m.err = nil
		}
	}
	return m.err
}

// Elected reports whether the manager leads (always, without leader election).
func (m *Manager) Elected() bool {
	select {
	case <-m.Manager.Elected():
		return true
	default:
		return false
	}
}
