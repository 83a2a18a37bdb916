// Package controllers holds the AgentSession reconciler: the only writer of plan/mode events.
//
// A reconcile reads the session, its PlanModeConfig and the log tail, computes the new status in
// named phases (phases.go lists them in order, one file per concern), and writes the status once
// (status_writer.go). Conditions are set from typed failures (errors.go, conditions.go).
package controllers

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/eventqueue"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// FieldManager is the manager's field manager for every status write.
const FieldManager = "planmode-manager"

const (
	configRefIndexKey      = ".spec.planMode.configRef.name"
	defaultMaxStoreBackoff = 30 * time.Second
	minStoreBackoff        = 250 * time.Millisecond
)

// DefaultEventMaxHold is cmd/manager's --event-max-hold (AgentSessionReconciler.EventMaxHold).
const DefaultEventMaxHold = 30 * time.Second

// AgentSessionReconciler projects each session's log into status.planMode, commits selections
// between turns, and answers the agent's step-boundary reports (docs/protocol.md).
type AgentSessionReconciler struct {
	client.Client
	// Store is the session log shared with the agent pods.
	Store sessionlog.Store
	// StoreID returns the store's identity as last probed ("" unknown: not checked); nil
	// checks only the log's position (phase_store.go).
	StoreID func() string
	// StoreChanged, when set, receives an event whenever the store's identity changed: every
	// session is then reconciled, and one recorded against the old store stops.
	StoreChanged <-chan ctrlevent.GenericEvent
	// Recorder emits events.k8s.io Events; nil disables them.
	Recorder recorder.EventRecorder
	// EventMaxHold, when positive, holds Events while reconciles run (internal/eventqueue), for
	// at most this long, so the acknowledgements agents wait for do not queue behind them.
	EventMaxHold time.Duration
	// Metrics is told about every status written (internal/metrics); nil disables it.
	Metrics StatusObserver
	// PendingPoll is kept for cmd/manager's --pending-poll and has no effect since protocol v2:
	// a selection queued during a turn waits for a step boundary of a later turn instead of
	// committing when the turn ends, so nothing polls for turn/end.
	PendingPoll time.Duration
	// MaxStoreBackoff caps the workqueue's per-session backoff after failed reconciles (a log
	// store that is down). Zero: 30s.
	MaxStoreBackoff time.Duration
	// Now is the clock (tests may pin it). Nil: time.Now.
	Now func() time.Time
	// APIReader reads the AgentSession past the cache when the cache may lag the manager's own
	// last write. SetupWithManager defaults it to the manager's API reader; nil trusts the cache
	// (tests that drive compute alone).
	APIReader client.Reader

	sessions sessionMemory
	inFlight atomic.Int64 // reconciles running now
}

// +kubebuilder:rbac:groups=agents.harness.dev,resources=agentsessions,verbs=get;list;watch
// +kubebuilder:rbac:groups=agents.harness.dev,resources=agentsessions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agents.harness.dev,resources=planmodeconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the reconciler, its watches and, with EventMaxHold, its Event
// queue. A failed reconcile is retried with the workqueue's per-session exponential backoff,
// from minStoreBackoff up to MaxStoreBackoff.
func (r *AgentSessionReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder != nil && r.EventMaxHold > 0 {
		q := eventqueue.New(r.Recorder, r.busy, r.EventMaxHold)
		if err := mgr.Add(q); err != nil {
			return fmt.Errorf("add the Event queue: %w", err)
		}
		r.Recorder = q
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](minStoreBackoff, r.maxBackoff())
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &agentsv1alpha1.AgentSession{}, configRefIndexKey,
		func(o client.Object) []string { return []string{o.(*agentsv1alpha1.AgentSession).ConfigName()} }); err != nil {
		return fmt.Errorf("index AgentSessions by config: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1alpha1.AgentSession{}).
		// A config created, changed or deleted changes the guidance in force (and may unblock a
		// selection waiting for it) for every session that names it.
		Watches(&agentsv1alpha1.PlanModeConfig{}, handler.EnqueueRequestsFromMapFunc(r.sessionsForConfig)).
		// A ReviewPolicy changed while a review is open applies to it (review_identity.go).
		Watches(&agentsv1alpha1.ReviewPolicy{}, handler.EnqueueRequestsFromMapFunc(r.sessionsForReviewPolicy))
	if r.StoreChanged != nil {
		b = b.WatchesRawSource(source.Channel(r.StoreChanged, handler.EnqueueRequestsFromMapFunc(r.allSessions))) // phase_store.go
	}
	return b.WithOptions(opts).
		Named("agentsession").
		Complete(r)
}

func (r *AgentSessionReconciler) sessionsForConfig(ctx context.Context, o client.Object) []reconcile.Request {
	var list agentsv1alpha1.AgentSessionList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{configRefIndexKey: o.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "list AgentSessions for PlanModeConfig", "config", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile reads the session, computes its status in phases (appending plan/mode only where
// the protocol says so), writes the status once, and then emits the transition Events.
func (r *AgentSessionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	var s agentsv1alpha1.AgentSession
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			r.sessions.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !s.DeletionTimestamp.IsZero() || r.settled(ctx, &s) {
		return ctrl.Result{}, nil
	}
	sc, err := r.compute(ctx, &s)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Events go out after the status write: the acknowledgement the agent waits for must not
	// queue behind them at the API server.
	defer r.emitEvents(sc)
	if res, err := r.writeStatus(ctx, sc); err != nil || !res.IsZero() {
		return res, err
	}
	if sc.failure != nil {
		return ctrl.Result{}, terminal(sc.failure) // shown in the status now; retried with the workqueue's backoff
	}
	return sc.result, nil
}

// busy reports whether a reconcile is running: the Event queue holds Events meanwhile.
func (r *AgentSessionReconciler) busy() bool { return r.inFlight.Load() > 0 }

func (r *AgentSessionReconciler) maxBackoff() time.Duration {
	if r.MaxStoreBackoff > 0 {
		return r.MaxStoreBackoff
	}
	return defaultMaxStoreBackoff
}

func (r *AgentSessionReconciler) now() metav1.Time {
	if r.Now != nil {
		return metav1.NewTime(r.Now())
	}
	return metav1.Now()
}
