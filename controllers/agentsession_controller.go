// Package controllers holds the AgentSession reconciler: the only writer of plan/mode events.
package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// FieldManager is the manager's field manager for every status write.
const FieldManager = "planmode-manager"

// kstatus condition types, set only while abnormal-true (kstatus treats their absence as
// "not reconciling / not stalled").
const (
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
)

// Event reasons (events.k8s.io) on transitions.
const (
	EventReasonCommitted     = "Committed"
	EventReasonQueued        = "Queued"
	EventReasonCancelled     = "Cancelled"
	EventReasonAppendFailed  = "AppendFailed"
	EventReasonInvalidBound  = "InvalidBoundaryReport"
	EventReasonStoreError    = "LogStoreUnavailable"
	EventReasonForkSeeded    = "ForkSeeded"
	EventReasonConfigMissing = "ConfigMissing"
	invalidBoundaryMsgPrefix = "invalid boundary report: "
	appendFailedMsgPrefix    = "log store: "
	configRefIndexKey        = ".spec.planMode.configRef.name"
	defaultPendingPoll       = 2 * time.Second
	defaultMaxStoreBackoff   = 30 * time.Second
	maxConflictRetries       = 5
	conflictRequeue          = 5 * time.Millisecond
)

// AgentSessionReconciler projects each session's log into status.planMode, commits selections
// between turns, and answers the agent's step-boundary reports (docs/protocol.md).
type AgentSessionReconciler struct {
	client.Client
	// Store is the session log shared with the agent pods.
	Store sessionlog.Store
	// Recorder emits events.k8s.io Events; nil disables them.
	Recorder recorder.EventRecorder
	// Metrics is told about every status written (internal/metrics); nil disables it.
	Metrics StatusObserver
	// PendingPoll is how often a session with a selection queued during an open turn is
	// re-read: the log's turn/end is not an API event, and the selection must commit as soon
	// as the turn has ended. Zero: 2s.
	PendingPoll time.Duration
	// MaxStoreBackoff caps the requeue delay after log-store errors. Zero: 30s.
	MaxStoreBackoff time.Duration
	// Now is the clock (tests may pin it). Nil: time.Now.
	Now func() time.Time
	// APIReader reads the AgentSession past the cache before a plan/mode append, so an append
	// is never decided on a cached object that lacks a newer write (our own last status, or a
	// user's selection). SetupWithManager defaults it to the manager's API reader; nil skips
	// the check (tests that drive Compute alone).
	APIReader client.Reader

	failures sync.Map       // types.NamespacedName -> int: consecutive store errors, for backoff
	rvLocked sync.Map       // types.NamespacedName -> true: the next status write is resourceVersion-locked
	written  writtenDigests // our last status.planMode per session, as stored
	inFlight atomic.Int64   // reconciles running now
}

// Busy reports whether a reconcile is running (internal/eventqueue holds Events meanwhile).
func (r *AgentSessionReconciler) Busy() bool { return r.inFlight.Load() > 0 }

// +kubebuilder:rbac:groups=agents.harness.dev,resources=agentsessions,verbs=get;list;watch
// +kubebuilder:rbac:groups=agents.harness.dev,resources=agentsessions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agents.harness.dev,resources=planmodeconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the reconciler and its watches.
func (r *AgentSessionReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &agentsv1alpha1.AgentSession{}, configRefIndexKey,
		func(o client.Object) []string { return []string{o.(*agentsv1alpha1.AgentSession).ConfigName()} }); err != nil {
		return fmt.Errorf("index AgentSessions by config: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1alpha1.AgentSession{}).
		// A config created, changed or deleted changes the guidance in force (and may unblock a
		// selection waiting for it) for every session that names it.
		Watches(&agentsv1alpha1.PlanModeConfig{}, handler.EnqueueRequestsFromMapFunc(r.sessionsForConfig)).
		WithOptions(opts).
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

// Reconcile reads (session, config, log tail), computes the new status in small named steps
// (appending plan/mode only where the protocol says so), and patches the status once.
func (r *AgentSessionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	log := logf.FromContext(ctx)
	var s agentsv1alpha1.AgentSession
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if r.settled(ctx, &s) {
		return ctrl.Result{}, nil
	}
	out, err := r.Compute(ctx, &s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if out.basis != nil {
		s = *out.basis // Compute moved to a fresher read of the object than the cache had
	}
	// Events go out after the status write: the acknowledgement the agent waits for must not
	// queue behind them at the API server.
	defer func() {
		for _, ev := range out.events {
			r.event(&s, ev)
		}
	}()
	if out.changed {
		if err := r.WriteStatus(ctx, &s, out.status); err != nil {
			if errors.Is(err, ErrStaleStatus) {
				// Our own status moved since the cached read: recompute from the new version.
				// Appends already made are recognised from the log, never repeated.
				log.V(1).Info("status changed since it was read; recomputing")
				return ctrl.Result{RequeueAfter: conflictRequeue}, nil
			}
			return ctrl.Result{}, err
		}
		log.V(1).Info("status written", "active", out.status.PlanMode.Active, "pending", out.status.PlanMode.Pending, "nextSeq", out.status.PlanMode.NextSeq)
		r.observe(&s, s.Status, out.status) // s still holds the status as read
	} else if out.checkedLog {
		r.verified(&s)
	}
	return r.withReviewDeadline(r.result(req.NamespacedName, out), out), nil
}

// settled reports, from the cache alone, that a reconcile has nothing to do: the status took on
// the current spec, nothing is pending, no boundary waits, no review is open, the config in
// force is unchanged, the last reconcile found everything in order and status.planMode is the
// one this process last wrote or checked against the log (so known to match it). Most
// reconciles are the echo of the manager's own status write or of an agent write that needs no
// answer; they then cost no log-store read. Anything else runs the full Compute.
func (r *AgentSessionReconciler) settled(ctx context.Context, s *agentsv1alpha1.AgentSession) bool {
	pm := &s.Status.PlanMode
	if s.Status.ObservedGeneration != s.Generation || pm.PendingActive != nil || pm.Config == nil {
		return false
	}
	if x := s.Spec.PlanMode.Active; x != nil && (pm.Selection == nil || *pm.Selection != *x || *x != pm.Active) {
		return false // a new selection, or one the log does not hold yet (reassertSelection)
	}
	if c := meta.FindStatusCondition(s.Status.Conditions, agentsv1alpha1.ConditionReady); c == nil ||
		c.Status != metav1.ConditionTrue || c.ObservedGeneration != s.Generation {
		return false
	}
	if a := s.Status.Agent; a != nil {
		if b := a.Boundary; b != nil {
			if lb := pm.LastBoundary; lb == nil || lb.Turn != b.Turn || lb.Step != b.Step || lb.Seq != b.Seq {
				return false
			}
		}
		if a.Review != nil || s.Status.Review != nil {
			return false // the review step decides (opens, decides, expires, withdraws)
		}
	} else if s.Status.Review != nil {
		return false
	}
	if s.Spec.Review != nil && s.Status.Review == nil {
		return false
	}
	// Only a status.planMode this process wrote or checked is known to match the log. Any
	// other (none since start, or another manager's in a split brain) is checked against the
	// log once: otherwise a status claiming a state the log does not hold would stay settled.
	if w, ok := r.written.load(client.ObjectKeyFromObject(s)); !ok || w != digestPlanMode(*pm) {
		return false
	}
	var cfg agentsv1alpha1.PlanModeConfig
	if err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.ConfigName()}, &cfg); err != nil {
		return false
	}
	return cfg.Name == pm.Config.Name && cfg.Generation == pm.Config.Generation
}

// verified records a status.planMode that a full reconcile just found to match the log (no
// write was due) as if this process had written it, when it has written none for the session:
// after a restart, the next echo of an unchanged session then takes settled's fast path again
// instead of reading the log tail each time until the next write. Only with no digest held:
// one that differs means the cache may lag our own write, and checkFresh must then read live.
func (r *AgentSessionReconciler) verified(s *agentsv1alpha1.AgentSession) {
	key := client.ObjectKeyFromObject(s)
	if _, ok := r.written.load(key); !ok {
		r.written.store(key, digestPlanMode(s.Status.PlanMode))
	}
}

// ErrStaleStatus: the status changed since it was read; recompute from a fresh read.
var ErrStaleStatus = errors.New("the status changed since it was read")

// WriteStatus writes the manager's part of the status (planMode, review, conditions,
// observedGeneration) as computed from orig, once, as a JSON patch of whole values.
//
// The write is conditional on the manager's own fields only ("test" operations that they still
// hold what orig holds). A concurrent write of status.agent by the agent (the usual race: it
// reports a boundary while the manager records a selection) or of spec by a user does not
// conflict, so neither costs a refused write; a status computed from a stale cache (missing our
// own last write) is refused with ErrStaleStatus instead of undoing it. The first write, and
// the retry after a refused one, are conditional on the resourceVersion instead, so a stored
// value written in another shape can never make the field tests fail forever.
func (r *AgentSessionReconciler) WriteStatus(ctx context.Context, orig *agentsv1alpha1.AgentSession, status agentsv1alpha1.AgentSessionStatus) error {
	key := client.ObjectKeyFromObject(orig)
	old := orig.Status
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	var ops []op
	if _, retry := r.rvLocked.Load(key); retry || old.ObservedGeneration == 0 {
		ops = append(ops, op{"test", "/metadata/resourceVersion", orig.ResourceVersion})
		if equality.Semantic.DeepEqual(old, agentsv1alpha1.AgentSessionStatus{}) {
			ops = append(ops, op{"add", "/status", map[string]any{}})
		}
	} else {
		ops = append(ops,
			op{"test", "/status/observedGeneration", old.ObservedGeneration},
			op{"test", "/status/planMode", old.PlanMode},
			op{"test", "/status/review", old.Review}, // null also matches an absent field
			op{"test", "/status/conditions", old.Conditions})
	}
	ops = append(ops,
		op{"add", "/status/observedGeneration", status.ObservedGeneration},
		op{"add", "/status/planMode", status.PlanMode},
		op{"add", "/status/conditions", status.Conditions})
	if status.Review != nil {
		ops = append(ops, op{"add", "/status/review", status.Review})
	} else if old.Review != nil {
		ops = append(ops, op{Op: "remove", Path: "/status/review"})
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("encode the status patch of AgentSession %s: %w", key, err)
	}
	obj := orig.DeepCopy()
	if err := r.Status().Patch(ctx, obj, client.RawPatch(types.JSONPatchType, body), client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsInvalid(err) || strings.Contains(err.Error(), "testing value") {
			r.rvLocked.Store(key, true)
			return fmt.Errorf("%w: %v", ErrStaleStatus, err)
		}
		return fmt.Errorf("patch status of AgentSession %s: %w", key, err)
	}
	r.rvLocked.Delete(key)
	// What the server stored, in its wire form: the cache shows exactly this once it has
	// caught up with our write (checkFresh).
	r.written.store(key, digestPlanMode(obj.Status.PlanMode))
	return nil
}

func (r *AgentSessionReconciler) result(key types.NamespacedName, out *Outcome) ctrl.Result {
	if out.storeErr != nil {
		n := 1
		if v, ok := r.failures.Load(key); ok {
			n = v.(int) + 1
		}
		r.failures.Store(key, n)
		return ctrl.Result{RequeueAfter: backoff(n, r.maxBackoff())}
	}
	r.failures.Delete(key)
	if pm := out.status.PlanMode; pm.PendingActive != nil && pm.TurnOpen {
		// Waiting for a boundary or for the turn to end (the log's turn/end is no API event):
		// a pending selection then commits, a cancelled residue is cleared.
		return ctrl.Result{RequeueAfter: r.pendingPoll()}
	}
	return ctrl.Result{}
}

func backoff(n int, max time.Duration) time.Duration {
	d := 250 * time.Millisecond
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d
}

func (r *AgentSessionReconciler) pendingPoll() time.Duration {
	if r.PendingPoll > 0 {
		return r.PendingPoll
	}
	return defaultPendingPoll
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

// Outcome is what Compute decided: the new status, whether it must be written, and the
// transition Events to emit.
type Outcome struct {
	status   agentsv1alpha1.AgentSessionStatus
	changed  bool
	events   []event
	storeErr error
	// checkedLog: the status was computed from a log tail read without error or conflict.
	checkedLog bool
	// basis is the object the status was computed from when it is not the one passed in.
	basis *agentsv1alpha1.AgentSession
}

// Status is the computed status.
func (o *Outcome) Status() agentsv1alpha1.AgentSessionStatus { return o.status }

// Changed reports whether the computed status differs from the stored one (a write is due).
func (o *Outcome) Changed() bool { return o.changed }

type event struct {
	typ, reason, action, note string
	// series: repeats aggregate into one Event (see AgentSessionReconciler.event).
	series bool
}

// agentSessionKind names the kind in the references the series Events carry.
const agentSessionKind = "AgentSession"

func (r *AgentSessionReconciler) event(s *agentsv1alpha1.AgentSession, e event) {
	if r.Recorder == nil {
		return
	}
	var regarding runtime.Object = s
	if e.series {
		// The frequent plan-mode transitions name the session without its resourceVersion, so
		// repeats of one (reason, action) join an events.k8s.io series (a count on one Event,
		// rewritten every few minutes at most) instead of costing an API write per toggle.
		// A reference, not an AgentSession: recorders take it as it is, and in a storm
		// thousands wait in internal/eventqueue (112 bytes each rather than 480).
		regarding = &corev1.ObjectReference{APIVersion: agentsv1alpha1.GroupVersion.String(),
			Kind: agentSessionKind, Namespace: s.Namespace, Name: s.Name, UID: s.UID}
	}
	r.Recorder.Eventf(regarding, nil, e.typ, e.reason, e.action, "%s", e.note)
}

// transitionAction names the direction of a plan-mode transition event.
func transitionAction(active bool) string {
	if active {
		return "EnterPlanMode"
	}
	return "LeavePlanMode"
}

// step carries one reconcile's working state between the named steps.
type step struct {
	r        *AgentSessionReconciler
	s        *agentsv1alpha1.AgentSession
	prev     agentsv1alpha1.PlanModeStatus // the stored status.planMode, read-only
	st       agentsv1alpha1.PlanModeStatus // the status being computed
	tail     harness.Tail
	tailRead bool
	// seedLength is the number of events a fork seeded (plan/modes below it are inherited).
	seedLength int64
	// holdEntry: the config is missing, so a selection entering plan mode is kept pending.
	holdEntry  bool
	configErr  string
	storeErr   error
	events     []event
	conflict   bool
	invalidMsg string
	// fresh is set when the live object differs from the one being computed (a stale cache);
	// the computation restarts from it, before anything is appended.
	fresh        *agentsv1alpha1.AgentSession
	freshChecked bool
	apiErr       error
}

// Compute runs the reconcile steps for one session and returns the status it would write. It
// appends plan/mode events (compare-and-swap) where the protocol says so, but writes nothing
// to the API; Reconcile patches the result. Tests call it alone to simulate a manager that
// crashes between the append and the status write.
func (r *AgentSessionReconciler) Compute(ctx context.Context, s *agentsv1alpha1.AgentSession) (*Outcome, error) {
	log := logf.FromContext(ctx).WithValues("session", s.Spec.SessionID)
	orig := s
	var st *step
	for attempt := 0; ; attempt++ {
		st = &step{r: r, s: s, prev: s.Status.PlanMode, st: *s.Status.PlanMode.DeepCopy()}
		if err := st.run(ctx, log); err != nil {
			return nil, err
		}
		if st.apiErr != nil {
			return nil, st.apiErr
		}
		if st.fresh != nil && attempt < maxConflictRetries {
			log.V(1).Info("the cached object is older than the API server's: recomputing from a live read before appending")
			s = st.fresh
			continue
		}
		if !st.conflict {
			break
		}
		if attempt >= maxConflictRetries {
			// Another writer keeps winning the race for the next seq: report it and retry later.
			st.storeErr = fmt.Errorf("append to session %q: seq conflict persisted after %d attempts", s.Spec.SessionID, attempt+1)
			break
		}
		log.V(1).Info("seq conflict: re-reading the log tail and recomputing", "attempt", attempt+1)
	}
	status := *s.Status.DeepCopy()
	status.PlanMode = st.st
	status.ObservedGeneration = s.Generation
	st.reviewStep(&status) // plan review (review.go)
	st.conditions(&status)
	out := &Outcome{status: status, events: st.events, storeErr: st.storeErr,
		checkedLog: st.tailRead && st.storeErr == nil && !st.conflict}
	if s != orig {
		out.basis = s
	}
	old := s.Status.DeepCopy()
	if n := old.PlanMode.Notice; n != nil && st.tailRead && n.Seq < st.tail.LastStepStartSeq {
		// A delivered notice is dropped with the next write, but is no reason to write.
		old.PlanMode.Notice = nil
	}
	out.changed = statusChanged(*old, status)
	return out, nil
}

func (st *step) run(ctx context.Context, log logr.Logger) error {
	if err := st.readConfig(ctx); err != nil {
		return err
	}
	if !st.ensureFork(ctx) {
		return nil
	}
	if !st.readTail(ctx) {
		st.failBoundary()
		return nil
	}
	// Whatever a later step decides, the status mirrors the tail as it now stands.
	defer st.project()
	st.recoverUnrecorded()
	if !st.applySelection(ctx) {
		return nil
	}
	st.reassertSelection(log)
	if !st.flushBetweenTurns(ctx) {
		return nil
	}
	st.answerBoundary(ctx, log)
	return nil
}

// readConfig resolves the PlanModeConfig in force. A missing config blocks only entering plan
// mode (there would be no guidance to render); leaving it never waits for a config.
func (st *step) readConfig(ctx context.Context) error {
	name := st.s.ConfigName()
	var cfg agentsv1alpha1.PlanModeConfig
	err := st.r.Get(ctx, types.NamespacedName{Namespace: st.s.Namespace, Name: name}, &cfg)
	switch {
	case apierrors.IsNotFound(err):
		st.st.Config = nil
		st.holdEntry = true
		st.configErr = fmt.Sprintf("PlanModeConfig %q not found in namespace %q: create it or set spec.planMode.configRef.name; entering plan mode waits for it", name, st.s.Namespace)
		return nil
	case err != nil:
		return fmt.Errorf("get PlanModeConfig %s/%s: %w", st.s.Namespace, name, err)
	}
	sum := sha256.Sum256([]byte(cfg.Spec.Section))
	st.st.Config = &agentsv1alpha1.ConfigInForce{Name: name, Generation: cfg.Generation, SectionSHA256: hex.EncodeToString(sum[:])}
	return nil
}

// ensureFork seeds a forked session's empty log with its parent's prefix, once. It reports
// whether the reconcile may go on.
func (st *step) ensureFork(ctx context.Context) bool {
	f := st.s.Spec.Fork
	if f == nil {
		return true
	}
	sid := st.s.Spec.SessionID
	info, err := st.r.Store.Info(ctx, sid)
	if err == nil {
		if info.ParentSession != f.SessionID {
			st.storeFailure(fmt.Errorf("session %q already exists in the log store without parent %q; spec.fork only seeds a new, empty session", sid, f.SessionID))
			return false
		}
		st.seedLength = info.SeedLength
		return true
	}
	if !errors.Is(err, sessionlog.ErrNotFound) {
		st.storeFailure(fmt.Errorf("read session %q: %w", sid, err))
		return false
	}
	through := int64(-1)
	if f.ThroughSeq != nil {
		through = *f.ThroughSeq
	}
	tail, err := st.r.Store.Fork(ctx, f.SessionID, sid, through)
	if err != nil {
		if sessionlog.IsConflict(err) {
			st.conflict = true // a concurrent reconcile seeded it: read again
			return false
		}
		st.storeFailure(fmt.Errorf("fork session %q from %q: %w", sid, f.SessionID, err))
		return false
	}
	st.seedLength = tail.NextSeq
	st.emit(corev1.EventTypeNormal, EventReasonForkSeeded, "Fork",
		fmt.Sprintf("seeded %d events from session %q; inherited plan mode %v", tail.NextSeq, f.SessionID, tail.Active))
	return true
}

func (st *step) readTail(ctx context.Context) bool {
	t, err := st.r.Store.Tail(ctx, st.s.Spec.SessionID)
	if err != nil {
		st.storeFailure(fmt.Errorf("read the log tail of session %q: %w", st.s.Spec.SessionID, err))
		if c := meta.FindStatusCondition(st.s.Status.Conditions, agentsv1alpha1.ConditionReady); c == nil || c.Reason != agentsv1alpha1.ReasonLogStoreError {
			st.emit(corev1.EventTypeWarning, EventReasonStoreError, "ReadLog", st.storeErr.Error())
		}
		return false
	}
	st.tail = t
	st.tailRead = true
	return true
}

// recoverUnrecorded recognises a plan/mode this manager appended but never recorded in the
// status (a crash or a failed status write between the append and the patch): the log is the
// truth, so the committed state comes from the tail, and the narration it owes is recomputed.
func (st *step) recoverUnrecorded() {
	t := st.tail
	if t.LastPlanModeSeq < 0 || t.LastPlanModeSeq < st.prev.NextSeq || t.LastPlanModeSeq < st.seedLength {
		return
	}
	st.st.Notice = nil
	if t.LastPlanModeSeq < t.LastStepStartSeq {
		return // a step already started after it: nothing is owed any more
	}
	if st.prev.PendingSource == agentsv1alpha1.PendingSourceExit && st.prev.PendingActive != nil && *st.prev.PendingActive == t.Active {
		return // an approved exit is never narrated
	}
	if n := planmode.Narration(t.Told, t.Active); n != "" {
		st.st.Notice = &agentsv1alpha1.OwedNotice{Seq: t.LastPlanModeSeq, Text: n}
	}
}

func (st *step) state() planmode.State {
	var p *planmode.Pending
	if st.st.PendingActive != nil {
		p = &planmode.Pending{Active: *st.st.PendingActive, Narrate: st.st.PendingSource != agentsv1alpha1.PendingSourceExit}
	}
	return planmode.State{Logged: st.tail.Active, Pending: p, TurnOpen: st.tail.TurnOpen, Told: st.tail.Told}
}

func (st *step) setPending(p *planmode.Pending) {
	if p == nil {
		st.st.PendingActive = nil
		st.st.PendingSource = ""
		return
	}
	a := p.Active
	st.st.PendingActive = &a
	st.st.PendingSource = agentsv1alpha1.PendingSourceUser
	if !p.Narrate {
		st.st.PendingSource = agentsv1alpha1.PendingSourceExit
	}
}

// applySelection is set(x), edge-triggered on spec.planMode.active: only a value the status has
// not taken on yet is a new selection, so a repeated reconcile never selects twice. It reports
// whether the reconcile may go on.
func (st *step) applySelection(ctx context.Context) bool {
	x := st.s.Spec.PlanMode.Active
	if x == nil || (st.prev.Selection != nil && *st.prev.Selection == *x) {
		return true
	}
	sel := *x
	st.st.Selection = &sel
	if !sel && st.approvalExits() {
		return true // the review step records it as the approved exit: silent, at the next boundary
	}
	d := planmode.Set(st.state(), sel)
	if d.Append != nil && *d.Append && st.holdEntry {
		// No guidance to render: keep the entry pending until the config exists.
		d = planmode.SetDecision{Outcome: planmode.Queued, Pending: &planmode.Pending{Active: true, Narrate: true}}
	}
	switch d.Outcome {
	case planmode.Noop:
		return true
	case planmode.Queued:
		st.setPending(d.Pending)
		st.emitSeries(corev1.EventTypeNormal, EventReasonQueued, transitionAction(sel),
			queuedNote.of(sel))
		return true
	case planmode.Cancelled:
		st.setPending(d.Pending)
		st.emitSeries(corev1.EventTypeNormal, EventReasonCancelled, transitionAction(sel),
			cancelledNote.of(sel))
		return true
	}
	// Committed: between turns, append at once.
	ok := st.appendPlanMode(ctx, st.tail.NextSeq, sel)
	if !ok {
		if !st.conflict {
			// Keep the durable selection pending so the between-turns flush retries it.
			st.setPending(&planmode.Pending{Active: sel, Narrate: true})
		}
		return false
	}
	st.setPending(nil)
	st.owe(d.Notice)
	return true
}

// reassertSelection is the safety net under the edge-triggered selection: a selection the
// status has taken on (spec.planMode.active equals status.planMode.selection) that the log does
// not hold, with nothing pending, can only be one that was lost (for example decided on a
// cached object that lacked the user's newest spec before a crash). The user's desired state
// wins: it becomes pending again, and the between-turns flush or the next boundary commits it,
// narrated like any user selection. An approval's own active:false is left to the review step.
func (st *step) reassertSelection(log logr.Logger) {
	x := st.s.Spec.PlanMode.Active
	if x == nil || st.st.PendingActive != nil || *x == st.tail.Active || st.approvalExits() {
		return
	}
	if st.st.Selection == nil || *st.st.Selection != *x {
		return // not taken on yet: applySelection decides it
	}
	if *x && st.holdEntry {
		st.setPending(&planmode.Pending{Active: true, Narrate: true})
		return
	}
	log.Info("the log does not hold the selection the status took on; selecting it again", "selection", *x, "logged", st.tail.Active)
	st.setPending(&planmode.Pending{Active: *x, Narrate: true})
}

// flushBetweenTurns appends a selection queued during a turn that has ended since (or one whose
// earlier append failed). Nothing else would flush it: no boundary runs until the next prompt.
func (st *step) flushBetweenTurns(ctx context.Context) bool {
	if st.tail.TurnOpen || st.st.PendingActive == nil {
		return true
	}
	d := planmode.Flush(st.state())
	if d.Append == nil {
		st.setPending(nil) // net-zero: nothing to log
		return true
	}
	if *d.Append && st.holdEntry {
		return true
	}
	if !st.appendPlanMode(ctx, st.tail.NextSeq, *d.Append) {
		return false
	}
	st.setPending(nil)
	st.owe(d.Notice)
	return true
}

// unansweredBoundary is the agent's reported boundary when it has no acknowledgement yet.
func (st *step) unansweredBoundary() *agentsv1alpha1.StepBoundary {
	if st.s.Status.Agent == nil || st.s.Status.Agent.Boundary == nil {
		return nil
	}
	b := st.s.Status.Agent.Boundary
	if lb := st.prev.LastBoundary; lb != nil && lb.Turn == b.Turn && lb.Step == b.Step && lb.Seq == b.Seq {
		return nil // answered already: an answer is final for its (turn, step, seq)
	}
	return b
}

// failBoundary answers a waiting boundary Failed when the log cannot be read at all, so the
// agent fails its proposal now instead of waiting out its timeout.
func (st *step) failBoundary() {
	b := st.unansweredBoundary()
	if b == nil || st.storeErr == nil {
		return
	}
	st.st.LastBoundary = &agentsv1alpha1.BoundaryAck{
		Turn: b.Turn, Step: b.Step, Seq: b.Seq, Time: st.r.now(),
		Result: agentsv1alpha1.BoundaryFailed, Active: st.prev.Active, NextSeq: st.prev.NextSeq,
		Message: appendFailedMsgPrefix + st.storeErr.Error() + "; the selection stays pending for the next boundary",
	}
}

// answerBoundary answers the step boundary in status.agent.boundary, once.
func (st *step) answerBoundary(ctx context.Context, log logr.Logger) {
	b := st.unansweredBoundary()
	if b == nil {
		return
	}
	t := st.tail
	ack := &agentsv1alpha1.BoundaryAck{Turn: b.Turn, Step: b.Step, Seq: b.Seq, Time: st.r.now()}
	if msg := st.checkBoundary(b); msg != "" {
		ack.Result = agentsv1alpha1.BoundaryFailed
		ack.Active = t.Active
		ack.NextSeq = t.NextSeq
		ack.Message = invalidBoundaryMsgPrefix + msg
		st.st.LastBoundary = ack
		st.invalidMsg = msg
		log.Info("refused an invalid step-boundary report", "turn", b.Turn, "step", b.Step, "seq", b.Seq, "reason", msg)
		st.emit(corev1.EventTypeWarning, EventReasonInvalidBound, "AnswerBoundary", ack.Message)
		return
	}
	if b.Seq == t.NextSeq-1 {
		// Our plan/mode at b.seq, appended for this very boundary by a reconcile that did not
		// get to write the ack: answer it without appending again.
		st.admit(ack, t.Active, t.NextSeq, st.owedNoticeAt(b.Seq))
		if st.st.PendingActive != nil && *st.st.PendingActive == t.Active {
			st.setPending(nil)
		}
		return
	}
	d := planmode.Flush(st.state())
	if d.Append != nil && *d.Append && st.holdEntry {
		d = planmode.FlushDecision{Active: t.Active} // the entry waits for its config
	}
	if d.Append != nil && t.Step >= 1 && t.LastPlanModeSeq > t.LastStepStartSeq {
		// A plan/mode already landed at this boundary and no step started since (only an
		// agent that broke the protocol gets here): a second one would leave two at one
		// boundary. Admit the step with the logged state; the selection waits for the next.
		d = planmode.FlushDecision{Active: t.Active}
	}
	if d.Append == nil {
		if d.ClearPending {
			st.setPending(nil)
		}
		st.admit(ack, t.Active, t.NextSeq, st.owedNoticeAfter(t.LastStepStartSeq))
		return
	}
	if !st.appendPlanMode(ctx, b.Seq, *d.Append) {
		if st.conflict {
			return
		}
		ack.Result = agentsv1alpha1.BoundaryFailed
		ack.Active = t.Active
		ack.NextSeq = t.NextSeq
		ack.Message = appendFailedMsgPrefix + st.storeErr.Error() + "; the selection stays pending for the next boundary"
		st.st.LastBoundary = ack
		return
	}
	st.setPending(nil)
	st.owe(d.Notice) // at b.seq: the admitted step records it (the ack carries it)
	st.admit(ack, st.tail.Active, st.tail.NextSeq, d.Notice)
}

// checkBoundary validates a report against the log; "" when valid.
func (st *step) checkBoundary(b *agentsv1alpha1.StepBoundary) string {
	t := st.tail
	switch {
	case !t.TurnOpen:
		return fmt.Sprintf("status.agent.boundary names turn %d, but the log has no open turn (next seq %d); report a boundary only inside a turn", b.Turn, t.NextSeq)
	case b.Turn != t.Turn:
		return fmt.Sprintf("status.agent.boundary.turn is %d, but the open turn in the log is %d", b.Turn, t.Turn)
	case t.StepOpen:
		return fmt.Sprintf("status.agent.boundary reported while step %d is still open in the log; a boundary comes after step/end", t.Step)
	case b.Step <= t.Step:
		return fmt.Sprintf("status.agent.boundary.step is %d, but step %d already started in turn %d; steps only go forward", b.Step, t.Step, t.Turn)
	case st.prev.LastBoundary != nil && st.prev.LastBoundary.Result == agentsv1alpha1.BoundaryAdmitted &&
		st.prev.LastBoundary.Turn == b.Turn && st.prev.LastBoundary.Step == b.Step && st.prev.LastBoundary.Seq != b.Seq:
		return fmt.Sprintf("status.agent.boundary.step %d of turn %d was already admitted at seq %d; report each step's boundary once and append its step/start at the acknowledged nextSeq",
			b.Step, b.Turn, st.prev.LastBoundary.Seq)
	case b.Seq == t.NextSeq:
		return ""
	case b.Seq == t.NextSeq-1 && t.LastPlanModeSeq == b.Seq && b.Seq >= st.prev.NextSeq:
		return "" // our own unacknowledged plan/mode (see answerBoundary)
	case b.Seq > t.NextSeq:
		return fmt.Sprintf("status.agent.boundary.seq is %d, ahead of the log's next seq %d; report the tail you read", b.Seq, t.NextSeq)
	default:
		return fmt.Sprintf("status.agent.boundary.seq is %d, but the log's next seq is %d (events were appended since); read the tail again and report it", b.Seq, t.NextSeq)
	}
}

func (st *step) admit(ack *agentsv1alpha1.BoundaryAck, active bool, next int64, notice string) {
	ack.Result = agentsv1alpha1.BoundaryAdmitted
	ack.Active = active
	ack.NextSeq = next
	ack.Notice = notice
	st.st.LastBoundary = ack
}

func (st *step) owedNoticeAt(seq int64) string {
	if n := st.st.Notice; n != nil && n.Seq == seq {
		return n.Text
	}
	return ""
}

func (st *step) owedNoticeAfter(lastStepStart int64) string {
	if n := st.st.Notice; n != nil && n.Seq > lastStepStart && n.Seq == st.tail.LastPlanModeSeq {
		return n.Text
	}
	return ""
}

// owe records the narration of the plan/mode just appended (at tail.LastPlanModeSeq); an
// append without narration supersedes any earlier owed notice.
func (st *step) owe(text string) {
	if text == "" {
		st.st.Notice = nil
		return
	}
	st.st.Notice = &agentsv1alpha1.OwedNotice{Seq: st.tail.LastPlanModeSeq, Text: text}
}

// appendPlanMode appends plan/mode{active} at seq with compare-and-swap. On a conflict it
// marks the reconcile for a recompute from a fresh tail; other failures are store failures.
func (st *step) appendPlanMode(ctx context.Context, seq int64, active bool) bool {
	if !st.checkFresh(ctx) {
		return false
	}
	t, err := st.r.Store.Append(ctx, st.s.Spec.SessionID, []harness.Event{harness.PlanModeEvent(seq, active)})
	if err != nil {
		if sessionlog.IsConflict(err) {
			st.conflict = true
			return false
		}
		st.storeFailure(fmt.Errorf("append plan/mode {active: %v} at seq %d to session %q: %w", active, seq, st.s.Spec.SessionID, err))
		st.emit(corev1.EventTypeWarning, EventReasonAppendFailed, "Append", st.storeErr.Error())
		return false
	}
	st.tail = t
	st.emitSeries(corev1.EventTypeNormal, EventReasonCommitted, transitionAction(active), committedNote.of(active))
	return true
}

// checkFresh makes sure an append is decided on the newest object. The cache can lag behind
// the manager's own last status write (a pending selection already settled, or a selection
// already taken on); appending on such a read would log a state the user no longer wants.
// When the cached status.planMode is the one this process last wrote (or checked, having
// written none), the cache has our write and nothing else writes that field (the webhook keeps
// it the manager's), so no read is needed. Otherwise (a first reconcile after start, or a
// lagging cache) one live read decides.
// A user's spec change the cache has not shown yet is harmless: it is taken on next, as if it
// had arrived just after this append. It reports whether the append may go ahead; otherwise
// st.fresh holds the object to recompute from, or st.apiErr why it could not be read.
func (st *step) checkFresh(ctx context.Context) bool {
	if st.r.APIReader == nil || st.freshChecked {
		return true
	}
	if w, ok := st.r.written.load(client.ObjectKeyFromObject(st.s)); ok && w == digestPlanMode(st.s.Status.PlanMode) {
		st.freshChecked = true
		return true
	}
	var live agentsv1alpha1.AgentSession
	if err := st.r.APIReader.Get(ctx, client.ObjectKeyFromObject(st.s), &live); err != nil {
		st.apiErr = fmt.Errorf("read AgentSession %s/%s before appending: %w", st.s.Namespace, st.s.Name, err)
		st.conflict = true // record nothing from this attempt
		return false
	}
	if live.ResourceVersion != st.s.ResourceVersion {
		st.fresh = &live
		st.conflict = true // record nothing from this attempt
		return false
	}
	st.freshChecked = true
	return true
}

// planModeDigest identifies a status.planMode by the SHA-256 of its JSON (truncated to 128
// bits): the written map holds one per session, and at 10,000 sessions a digest instead of a
// copy of the struct is 2.5 MB less live heap. Both sides of a comparison are decoded from the
// API server's JSON (our write's response, the cache's watch event), so equal values encode
// equally.
type planModeDigest [16]byte

func digestPlanMode(pm agentsv1alpha1.PlanModeStatus) planModeDigest {
	b, _ := json.Marshal(pm) // plain fields, pointers and metav1.Time: cannot fail
	sum := sha256.Sum256(b)
	return planModeDigest(sum[:16])
}

// writtenDigests maps each session to the digest of the status.planMode the manager last
// wrote. A plain map under a mutex, not a sync.Map: at 10,000 sessions the sync.Map held about
// 250 bytes per 16-byte digest (boxed keys and values, trie nodes), 2.5 MB of the live heap.
// The zero value is ready to use.
type writtenDigests struct {
	mu sync.Mutex
	m  map[types.NamespacedName]planModeDigest
}

func (w *writtenDigests) load(key types.NamespacedName) (planModeDigest, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.m[key]
	return d, ok
}

func (w *writtenDigests) store(key types.NamespacedName, d planModeDigest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.NamespacedName]planModeDigest{}
	}
	w.m[key] = d
}

func (w *writtenDigests) delete(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}

func (st *step) storeFailure(err error) {
	st.storeErr = err
}

// project copies the log's tail into the status fields that mirror it.
func (st *step) project() {
	t := st.tail
	if st.prev.Active != t.Active || st.st.LastTransitionTime == nil && t.Active {
		now := st.r.now()
		st.st.LastTransitionTime = &now
	}
	st.st.Active = t.Active
	st.st.NextSeq = t.NextSeq
	st.st.TurnOpen = t.TurnOpen
	st.st.ToldActive = t.Told
	st.st.Pending = st.st.PendingActive != nil && *st.st.PendingActive != t.Active
	if st.st.Notice != nil && st.st.Notice.Seq < t.LastStepStartSeq {
		st.st.Notice = nil // delivered: a step started after it
	}
}

func (st *step) emit(typ, reason, action, note string) {
	st.events = append(st.events, event{typ: typ, reason: reason, action: action, note: note})
}

func (st *step) emitSeries(typ, reason, action, note string) {
	st.events = append(st.events, event{typ: typ, reason: reason, action: action, note: note, series: true})
}

// conditions sets Ready (with the API's reasons) plus the kstatus Reconciling/Stalled pair.
func (st *step) conditions(status *agentsv1alpha1.AgentSessionStatus) {
	gen := st.s.Generation
	set := func(typ string, cs metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: typ, Status: cs, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	ready := func(cs metav1.ConditionStatus, reason, msg string) {
		set(agentsv1alpha1.ConditionReady, cs, reason, msg)
	}
	stalled := ""
	pm := status.PlanMode
	lb := pm.LastBoundary
	switch {
	case st.storeErr != nil:
		stalled = agentsv1alpha1.ReasonLogStoreError
		ready(metav1.ConditionFalse, stalled, st.storeErr.Error())
	case st.configErr != "":
		stalled = agentsv1alpha1.ReasonConfigMissing
		ready(metav1.ConditionFalse, stalled, st.configErr)
	case lb != nil && lb.Result == agentsv1alpha1.BoundaryFailed && strings.HasPrefix(lb.Message, invalidBoundaryMsgPrefix):
		stalled = agentsv1alpha1.ReasonInvalidBoundary
		ready(metav1.ConditionFalse, stalled, lb.Message)
	case lb != nil && lb.Result == agentsv1alpha1.BoundaryFailed && pm.Pending:
		stalled = agentsv1alpha1.ReasonLogStoreError
		ready(metav1.ConditionFalse, stalled, lb.Message)
	case pm.Pending:
		ready(metav1.ConditionFalse, agentsv1alpha1.ReasonSelectionPending,
			fmt.Sprintf("plan mode %s is selected and waits for the agent's next step boundary", planmode.OnOff(*pm.PendingActive)))
	default:
		ready(metav1.ConditionTrue, agentsv1alpha1.ReasonInSync, fmt.Sprintf("plan mode %s is committed in the session log", planmode.OnOff(pm.Active)))
	}
	if stalled != "" {
		set(ConditionStalled, metav1.ConditionTrue, stalled, meta.FindStatusCondition(status.Conditions, agentsv1alpha1.ConditionReady).Message)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, ConditionStalled)
	}
	if pm.Pending && stalled == "" {
		set(ConditionReconciling, metav1.ConditionTrue, agentsv1alpha1.ReasonSelectionPending, "a selection waits for the agent's next step boundary")
	} else {
		meta.RemoveStatusCondition(&status.Conditions, ConditionReconciling)
	}
}

// statusChanged reports whether a write is due. The log-position mirror fields (nextSeq,
// turnOpen, toldActive) alone never cause a write: they move with every event the agent
// appends, and writing them would cost an API write per agent event. They are refreshed with
// every write made for another reason.
func statusChanged(old, new agentsv1alpha1.AgentSessionStatus) bool {
	a, b := old.DeepCopy(), new.DeepCopy()
	for _, s := range []*agentsv1alpha1.AgentSessionStatus{a, b} {
		s.PlanMode.NextSeq = 0
		s.PlanMode.TurnOpen = false
		s.PlanMode.ToldActive = nil
	}
	return !equality.Semantic.DeepEqual(a, b)
}

// The transition Events' notes, made once: the Event writer keeps each Event's note until its
// series ends, minutes after a storm, and 30,000 copies of six texts took 1.6 MB of its heap
// (BenchmarkSeriesCacheBytes in internal/eventsink).
var (
	queuedNote    = newNotes("plan mode %s queued: applies at the agent's next step boundary")
	cancelledNote = newNotes("pending selection cancelled: the log already has plan mode %s")
	committedNote = newNotes("plan mode %s committed to the session log")
)

// notes holds a note for plan mode off and for on.
type notes [2]string

func newNotes(format string) notes {
	return notes{fmt.Sprintf(format, "off"), fmt.Sprintf(format, "on")}
}

func (n notes) of(active bool) string {
	if active {
		return n[1]
	}
	return n[0]
}
