// Package controllers holds the AgentSession reconciler: the only writer of plan/mode events.
//
// A reconcile reads the session, its PlanModeConfig and the log tail, computes the new status in
// named phases (phases.go lists them in order, one file per concern), and writes the status once
// (status_patcher.go). A phase's typed failure (failures.go) becomes the conditions
// (conditions.go); the Events a person needs are recorded in events.go.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/sessioncache"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// FieldManager is the manager's field manager for every status write.
const FieldManager = "planmode-manager"

const (
	defaultMaxStoreBackoff = 30 * time.Second
	minStoreBackoff        = 250 * time.Millisecond
	// staleRequeue is how soon a reconcile whose write was stale runs again, from the newer
	// object.
	staleRequeue = 5 * time.Millisecond
	// DefaultPendingStatusDelay is cmd/manager's --pending-status-delay: a toggle made during
	// a step shorter than this is answered at the step's end with no pending write.
	DefaultPendingStatusDelay = 30 * time.Second
)

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
	// Recorder records the Events (events.go): the manager's GetEventRecorder. Nil records
	// none; the manager's log still has a line for each.
	Recorder recorder.EventRecorder
	// Metrics is told about every status written (internal/metrics); nil disables it.
	Metrics StatusObserver
	// SessionGauges, when set, is told of every AgentSession change the controller's watch
	// delivers (the session gauges of internal/metrics): a handler of the same informer, so
	// the gauges need no informer or start of their own.
	SessionGauges handler.EventHandler
	// MaxStoreBackoff caps the workqueue's per-session backoff after failed reconciles (a log
	// store that is down). Zero: 30s.
	MaxStoreBackoff time.Duration
	// Now is the clock (tests may pin it). Nil: time.Now.
	Now func() time.Time
	// APIReader reads the AgentSession past the cache when the cache may lag the manager's own
	// last write (status_patcher.go). SetupWithManager defaults it to the manager's API reader;
	// nil trusts the cache (tests that drive compute alone).
	APIReader client.Reader
	// PendingStatusDelay is how long the pending status of a user's selection made during a
	// turn is held for the agent's step-boundary report, whose answer then carries the commit
	// (pending_deferral.go). Zero writes it at once.
	PendingStatusDelay time.Duration

	statusOnce sync.Once
	status     statusPatcher
	memory     sessionMemory // session_memory.go
	warmStart  warmStart     // warm_start.go
	// sessions reads the cached AgentSessions without copies (the claims at start,
	// warm_start.go): the manager's cache, set by SetupWithManager.
	sessions client.Reader
	pending  pendingDeferrals
	backlog  backlog
}

// +kubebuilder:rbac:groups=agents.harness.dev,resources=agentsessions,verbs=get;list;watch
// +kubebuilder:rbac:groups=agents.harness.dev,resources=agentsessions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agents.harness.dev,resources=planmodeconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the reconciler and its watches. A failed reconcile is retried with the workqueue's per-session exponential backoff,
// from minStoreBackoff up to MaxStoreBackoff.
func (r *AgentSessionReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	r.sessions = mgr.GetCache()
	r.backlog.entered = r.observeStorm
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](minStoreBackoff, r.maxBackoff())
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1alpha1.AgentSession{}, builder.WithPredicates(r.backlog.changes())).
		// A config created, changed or deleted changes the guidance in force (and may unblock a
		// selection waiting for it) for every session that names it.
		Watches(&agentsv1alpha1.PlanModeConfig{}, handler.EnqueueRequestsFromMapFunc(r.sessionsForConfig)).
		// A ReviewPolicy changed while a review is open applies to it (review_identity.go).
		Watches(&agentsv1alpha1.ReviewPolicy{}, handler.EnqueueRequestsFromMapFunc(r.sessionsForReviewPolicy))
	if r.SessionGauges != nil {
		b = b.Watches(&agentsv1alpha1.AgentSession{}, r.SessionGauges)
	}
	if r.StoreChanged != nil {
		b = b.WatchesRawSource(source.Channel(r.StoreChanged, handler.EnqueueRequestsFromMapFunc(r.allSessions))) // phase_store.go
	}
	return b.WithOptions(opts).
		Named("agentsession").
		Complete(r)
}

// sessionsForConfig maps a PlanModeConfig change to the sessions of its namespace that name it.
func (r *AgentSessionReconciler) sessionsForConfig(ctx context.Context, o client.Object) []reconcile.Request {
	return r.cachedSessions(ctx, "PlanModeConfig "+o.GetName(), func(s *agentsv1alpha1.AgentSession) bool {
		return s.Namespace == o.GetNamespace() && s.ConfigName() == o.GetName()
	})
}

// cachedSessions returns a request for each cached session keep accepts. It reads the cache's
// own objects (sessioncache), not copies: a config's first event at a start names every session
// that uses it, and a list copying them all put the whole cache's size in garbage at once, the
// manager's peak memory. No field index either: it held a key per session for good, for
// lookups made only when a config or policy changes. At a start, before the sessions' informer
// has synced, the list may be partial; each session is enqueued by its own informer then, and
// reads the config when it runs. what names the event in the log of a failed read.
func (r *AgentSessionReconciler) cachedSessions(ctx context.Context, what string, keep func(*agentsv1alpha1.AgentSession) bool) []reconcile.Request {
	reader := r.sessions
	if reader == nil {
		reader = r.Client
	}
	sessions, err := sessioncache.List(ctx, reader)
	if err != nil {
		logf.FromContext(ctx).Error(err, "list the cached AgentSessions to reconcile after a change", "change", what)
		return nil
	}
	var reqs []reconcile.Request
	for _, s := range sessions {
		if keep(s) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)})
		}
	}
	return reqs
}

// Reconcile reads the session, computes its status in phases (appending plan/mode only where
// the protocol says so), writes the status once, and then emits the transition Events.
func (r *AgentSessionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s agentsv1alpha1.AgentSession
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			r.memory.forget(req.NamespacedName)
			r.pending.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !s.DeletionTimestamp.IsZero() || r.upToDate(ctx, &s) {
		return ctrl.Result{}, nil
	}
	sc, err := r.compute(ctx, &s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wait := r.holdPending(sc); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	// Events go out after the status write: the acknowledgement the agent waits for must not
	// queue behind them at the API server.
	defer r.recordEvents(sc)
	if res, err := r.patchStatus(ctx, sc); err != nil || !res.IsZero() {
		return res, err
	}
	return sc.outcome()
}

// patcher is the reconciler's status patcher, made on first use (the reconciler's fields are
// set by then).
func (r *AgentSessionReconciler) patcher() *statusPatcher {
	r.statusOnce.Do(func() { r.status.client, r.status.live, r.status.memory = r.Client, r.APIReader, &r.memory })
	return &r.status
}

// patchStatus writes the status a reconcile computed, once, or, when no write is due,
// remembers a status it checked against the log. A stale write is computed again soon.
func (r *AgentSessionReconciler) patchStatus(ctx context.Context, sc *sessionScope) (ctrl.Result, error) {
	p, key := r.patcher(), client.ObjectKeyFromObject(sc.session)
	if !sc.changed {
		if sc.logChecked() {
			p.checked(key, &sc.session.Status)
		}
		return ctrl.Result{}, nil
	}
	r.backlog.add()
	if err := p.patch(ctx, sc.session, sc.status); err != nil {
		if errors.Is(err, errStaleStatus) {
			logf.FromContext(ctx).V(1).Info("the status changed since it was read; computing again")
			return ctrl.Result{RequeueAfter: staleRequeue}, nil
		}
		return ctrl.Result{}, fmt.Errorf("patch status of AgentSession %s: %w", key, err)
	}
	r.pending.forget(key)
	pm := sc.status.PlanMode
	logf.FromContext(ctx).V(1).Info("status written", "active", pm.Active, "pending", pm.Pending, "nextSeq", pm.NextSeq)
	r.observe(sc.session, sc.session.Status, sc.status)
	return ctrl.Result{}, nil
}

// holdPending is how long the reconcile's write may still be held (pending_deferral.go): zero
// when it is not a held pending write or its time is up.
func (r *AgentSessionReconciler) holdPending(sc *sessionScope) time.Duration {
	if !sc.changed || !sc.holdable || r.PendingStatusDelay <= 0 {
		return 0
	}
	wait := r.pending.hold(sc.session, *sc.planMode.Selection, sc.tail.Turn, r.now().Time, r.PendingStatusDelay)
	if wait > 0 {
		r.observeHeld(sc.session)
	}
	return wait
}

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
