// Package metrics holds the planmode-operator's Prometheus metrics (docs/metrics.md).
//
// The reconciler reports each status it writes through one hook (Recorder.ObserveStatus, the
// controllers.StatusObserver interface): every transition, selection, boundary answer and
// review decision is read from the difference between the stored status and the written one.
// Counting written differences, not reconcile attempts, means a reconcile that loses a
// conflict and recomputes is not counted twice, and a manager restarted after an append that
// it never recorded counts the transition once, when it records it.
//
// Log-store calls are counted by a Store wrapper (InstrumentStore) and the session gauges from
// the changes of the reconciler's session watch (SessionCollector).
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// Namespace prefixes every metric of this package.
const Namespace = "planmode"

// Transition causes (label "cause" of planmode_transitions_total).
const (
	CauseUserBetweenTurns = "user_between_turns"
	CauseUserAtBoundary   = "user_at_boundary"
	CauseExitAtBoundary   = "exit_at_boundary"
	CauseExitBetweenTurns = "exit_between_turns"
	CauseFork             = "fork"
)

// Selection outcomes (label "outcome" of planmode_selections_total): the set() decision.
const (
	SelectionCommitted = "committed"
	SelectionQueued    = "queued"
	SelectionCancelled = "cancelled"
	SelectionNoop      = "noop"
)

// Boundary-answer reasons (label "reason" of planmode_boundary_acks_total).
const (
	AckCommitted     = "committed"      // Admitted, with a plan/mode appended for this boundary
	AckUnchanged     = "unchanged"      // Admitted, nothing appended
	AckInvalidReport = "invalid_report" // Failed: the report does not match the log
	AckLogStore      = "log_store"      // Failed: the log store could not be read or appended to
	AckOther         = "other"          // Failed for a reason this version does not know
)

// Label names that several metrics share.
const (
	labelOutcome   = "outcome"
	labelOperation = "operation"
)

var (
	// latencyBuckets covers a selection waiting for a boundary: sub-second (between turns or a
	// short step) to minutes (a long tool call).
	latencyBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	// periodBuckets covers a plan-mode period or a human review: seconds to a day.
	periodBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400}
)

// Recorder holds the reconciler-side metrics. Its methods are safe for concurrent use.
type Recorder struct {
	transitions      *prometheus.CounterVec
	selections       *prometheus.CounterVec
	pendingToCommit  *prometheus.HistogramVec
	planModePeriod   prometheus.Histogram
	boundaryAcks     *prometheus.CounterVec
	notices          prometheus.Counter
	reviews          *prometheus.CounterVec
	reviewsOpened    prometheus.Counter
	reviewLatency    *prometheus.HistogramVec
	storeOps         *prometheus.CounterVec
	storeErrors      *prometheus.CounterVec
	storeOpDurations *prometheus.HistogramVec
	storms           prometheus.Counter

	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu sync.Mutex
	// pendingSince is when this process first wrote a session's selection as pending: a
	// sub-second start for the pending-to-commit latency. After a restart the Ready
	// condition's lastTransitionTime (whole seconds) stands in.
	pendingSince map[types.UID]time.Time
}

// New builds a Recorder; register it with Register (or MustRegister) before use.
func New() *Recorder {
	r := &Recorder{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "transitions_total",
			Help: "Committed plan-mode transitions (plan/mode events the manager recorded), by cause and the state entered.",
		}, []string{"cause", "active"}),
		selections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "selections_total",
			Help: "New spec.planMode.active selections taken on, by the set() outcome: committed at once, queued for a step boundary, cancelled (a pending opposite undone) or noop.",
		}, []string{labelOutcome}),
		pendingToCommit: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "pending_to_commit_seconds",
			Help:    "Time from a selection becoming pending (or an approved exit) to its plan/mode commit, by source (user or exit).",
			Buckets: latencyBuckets,
		}, []string{"source"}),
		planModePeriod: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "plan_mode_period_seconds",
			Help:    "Length of each completed plan-mode period (from the commit of plan mode on to the commit of plan mode off); _sum is the total time spent in plan mode.",
			Buckets: periodBuckets,
		}),
		boundaryAcks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "boundary_acks_total",
			Help: "Step-boundary reports answered (status.planMode.lastBoundary), by result (Admitted, Failed) and reason.",
		}, []string{"result", "reason"}),
		notices: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "notices_owed_total",
			Help: "Plan-mode notices the manager handed to an agent to record (a narrated user selection).",
		}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "reviews_total",
			Help: "Plan reviews closed, by outcome (Approved, KeepPlanning, Dismissed, Expired, Rejected, Withdrawn).",
		}, []string{labelOutcome}),
		reviewsOpened: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "reviews_opened_total",
			Help: "Plan reviews opened (an exit_plan_mode plan posted while plan mode is committed).",
		}),
		reviewLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "review_decision_seconds",
			Help:    "Time from a plan being posted for review (as the manager first saw it) to its decision, by outcome (Approved is the approval latency).",
			Buckets: periodBuckets,
		}, []string{labelOutcome}),
		storeOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "log_store_operations_total",
			Help: "Session-log store calls made by the manager, by operation and result (ok, conflict, not_found, error).",
		}, []string{labelOperation, "result"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "log_store_errors_total",
			Help: "Session-log store calls that failed (result error: the store was unreachable or refused the call; conflicts and missing sessions are not errors).",
		}, []string{labelOperation}),
		storeOpDurations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "log_store_operation_seconds",
			Help:    "Latency of session-log store calls made by the manager, by operation.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}, []string{labelOperation}),
		storms: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "storms_total",
			Help: "Storms the reconciler entered: bursts of session changes and status writes during which its Events wait.",
		}),
		pendingSince: map[types.UID]time.Time{},
	}
	r.initSeries()
	return r
}

// initSeries creates every known label combination at zero, so dashboards and alerts see a
// series (and rate() works) before the first event of its kind.
func (r *Recorder) initSeries() {
	for _, cause := range []string{CauseUserBetweenTurns, CauseUserAtBoundary, CauseExitAtBoundary, CauseExitBetweenTurns, CauseFork} {
		for _, active := range []bool{true, false} {
			if (cause == CauseExitAtBoundary || cause == CauseExitBetweenTurns) && active {
				continue // an exit only ever leaves plan mode
			}
			r.transitions.WithLabelValues(cause, boolLabel(active))
		}
	}
	for _, o := range []string{SelectionCommitted, SelectionQueued, SelectionCancelled, SelectionNoop} {
		r.selections.WithLabelValues(o)
	}
	for _, src := range []string{"user", "exit"} {
		r.pendingToCommit.WithLabelValues(src)
	}
	r.boundaryAcks.WithLabelValues(string(agentsv1alpha1.BoundaryAdmitted), AckCommitted)
	r.boundaryAcks.WithLabelValues(string(agentsv1alpha1.BoundaryAdmitted), AckUnchanged)
	for _, reason := range []string{AckInvalidReport, AckLogStore, AckOther} {
		r.boundaryAcks.WithLabelValues(string(agentsv1alpha1.BoundaryFailed), reason)
	}
	for _, o := range []agentsv1alpha1.ReviewPhase{agentsv1alpha1.ReviewApproved, agentsv1alpha1.ReviewKeptPlanning,
		agentsv1alpha1.ReviewDismissed, agentsv1alpha1.ReviewExpired, agentsv1alpha1.ReviewRejected} {
		r.reviews.WithLabelValues(string(o))
		if o != agentsv1alpha1.ReviewRejected {
			r.reviewLatency.WithLabelValues(string(o))
		}
	}
	r.reviews.WithLabelValues("Withdrawn")
	for _, op := range []string{OpTail, OpAppend, OpInfo, OpFork} { // what the reconciler calls
		r.storeErrors.WithLabelValues(op)
		r.storeOpDurations.WithLabelValues(op)
		for _, res := range []string{"ok", "conflict", "error"} {
			r.storeOps.WithLabelValues(op, res)
		}
	}
}

func (r *Recorder) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.transitions, r.selections, r.pendingToCommit, r.planModePeriod, r.boundaryAcks,
		r.notices, r.reviews, r.reviewsOpened, r.reviewLatency, r.storeOps, r.storeErrors, r.storeOpDurations, r.storms}
}

// Register registers every metric of the Recorder with reg, e.g. controller-runtime's
// sigs.k8s.io/controller-runtime/pkg/metrics.Registry (served on the manager's /metrics).
func (r *Recorder) Register(reg prometheus.Registerer) error {
	for _, c := range r.collectors() {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (r *Recorder) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// ObserveStatus records what changed between the stored status (before) and the status the
// reconciler has just written for s (after). Call it only after the write succeeded.
func (r *Recorder) ObserveStatus(s *agentsv1alpha1.AgentSession, before, after agentsv1alpha1.AgentSessionStatus) {
	if r == nil || s == nil {
		return
	}
	now := r.now()
	b, a := before.PlanMode, after.PlanMode
	newAck := ackIsNew(b.LastBoundary, a.LastBoundary)

	r.observeSelection(b, a, newAck)
	if a.Active != b.Active {
		r.observeTransition(s, before, after, newAck, now)
	}
	r.trackPending(s.UID, b.Pending, a.Pending, now)

	if newAck {
		ack := a.LastBoundary
		r.boundaryAcks.WithLabelValues(string(ack.Result), ackReason(ack, b.Active)).Inc()
	}
	if n := a.Notice; n != nil && (b.Notice == nil || b.Notice.Seq != n.Seq) {
		r.notices.Inc()
	}
	r.observeReview(before, after, now)
}

// selectionTakenOn reports whether a new selection was applied: the status's selection moves
// only then.
func selectionTakenOn(b, a agentsv1alpha1.PlanModeStatus) bool {
	return a.Selection != nil && (b.Selection == nil || *b.Selection != *a.Selection)
}

// observeSelection counts a selection taken on, by what set() did with it.
func (r *Recorder) observeSelection(b, a agentsv1alpha1.PlanModeStatus, newAck bool) {
	if !selectionTakenOn(b, a) {
		return
	}
	switch {
	case a.Active != b.Active && !newAck:
		r.selections.WithLabelValues(SelectionCommitted).Inc()
	case a.Pending, a.Active != b.Active:
		// Pending, or taken on and committed by the answer to the agent's boundary report
		// (its pending write held): queued for a boundary either way.
		r.selections.WithLabelValues(SelectionQueued).Inc()
	case b.Pending:
		r.selections.WithLabelValues(SelectionCancelled).Inc()
	default:
		r.selections.WithLabelValues(SelectionNoop).Inc()
	}
}

// observeTransition counts a committed change of plan mode, by cause, with the time it waited
// as pending and, when plan mode ends, the length of the plan-mode period.
func (r *Recorder) observeTransition(s *agentsv1alpha1.AgentSession, before, after agentsv1alpha1.AgentSessionStatus, newAck bool, now time.Time) {
	b, a := before.PlanMode, after.PlanMode
	firstProjection := before.ObservedGeneration == 0 && b.NextSeq == 0 && b.LastTransitionTime == nil
	exit := b.PendingSource == agentsv1alpha1.PendingSourceExit && !a.Active
	cause := CauseUserBetweenTurns
	switch {
	case s.Spec.Fork != nil && firstProjection:
		cause = CauseFork
	case exit && newAck:
		cause = CauseExitAtBoundary
	case exit:
		cause = CauseExitBetweenTurns
	case newAck:
		cause = CauseUserAtBoundary
	}
	r.transitions.WithLabelValues(cause, boolLabel(a.Active)).Inc()
	if cause != CauseFork {
		source := "user"
		if exit {
			source = "exit"
		}
		if start, ok := r.pendingStart(s.UID, before, exit); ok {
			r.pendingToCommit.WithLabelValues(source).Observe(nonNegative(now.Sub(start)))
		} else if cause == CauseUserBetweenTurns && selectionTakenOn(b, a) {
			r.pendingToCommit.WithLabelValues(source).Observe(0) // committed by the reconcile that took it on
		}
	}
	if !a.Active && b.Active && b.LastTransitionTime != nil {
		r.planModePeriod.Observe(nonNegative(now.Sub(b.LastTransitionTime.Time)))
	}
}

// ackReason is the reason label of a new boundary answer; wasActive is plan mode before it.
func ackReason(ack *agentsv1alpha1.BoundaryAck, wasActive bool) string {
	switch {
	case ack.Result == agentsv1alpha1.BoundaryFailed && ack.Reason == agentsv1alpha1.ReasonInvalidBoundary:
		return AckInvalidReport
	case ack.Result == agentsv1alpha1.BoundaryFailed && ack.Reason == agentsv1alpha1.ReasonLogStoreError:
		return AckLogStore
	case ack.Result == agentsv1alpha1.BoundaryFailed:
		return AckOther
	case ack.NextSeq == ack.Seq+1 && ack.Active != wasActive:
		return AckCommitted
	}
	return AckUnchanged
}

func (r *Recorder) observeReview(before, after agentsv1alpha1.AgentSessionStatus, now time.Time) {
	br, ar := before.Review, after.Review
	if ar != nil && (br == nil || br.ID != ar.ID) && ar.Phase == agentsv1alpha1.ReviewPending {
		r.reviewsOpened.Inc()
	}
	switch {
	case br != nil && br.Phase == agentsv1alpha1.ReviewPending && ar == nil:
		r.reviews.WithLabelValues("Withdrawn").Inc()
	case ar == nil || ar.Phase == agentsv1alpha1.ReviewPending:
	case br == nil || br.ID != ar.ID || br.Phase == agentsv1alpha1.ReviewPending:
		r.observeDecision(br, ar, after.Agent, now)
	}
}

// observeDecision counts a review that has just been decided (br is the review before the
// write, nil or another one when it was opened and decided in one write) and, but for a
// Rejected one, the time from the plan's posting (when the manager opened the review; the
// agent's requestedAt for a review opened before that was recorded) to the decision.
func (r *Recorder) observeDecision(br, ar *agentsv1alpha1.ReviewStatus, agent *agentsv1alpha1.AgentReport, now time.Time) {
	outcome := string(ar.Phase)
	if ar.Phase == agentsv1alpha1.ReviewRejected {
		// Refused at once (plan mode not committed): no decision latency to speak of.
		r.reviews.WithLabelValues(outcome).Inc()
		return
	}
	if br == nil || br.ID != ar.ID {
		r.reviewsOpened.Inc() // opened and decided in one write
	}
	r.reviews.WithLabelValues(outcome).Inc()
	decided := now
	if ar.DecidedAt != nil {
		decided = ar.DecidedAt.Time
	}
	if ar.OpenedAt != nil {
		// The manager's clock: the agent's requestedAt may be skewed or forged.
		r.reviewLatency.WithLabelValues(outcome).Observe(nonNegative(decided.Sub(ar.OpenedAt.Time)))
		return
	}
	if agent != nil && agent.Review != nil && agent.Review.ID == ar.ID && agent.Review.RequestedAt != nil {
		r.reviewLatency.WithLabelValues(outcome).Observe(nonNegative(decided.Sub(agent.Review.RequestedAt.Time)))
	}
}

// pendingStart is when the selection just committed became pending: this process's record,
// else (after a restart) the approval time of an exit or the Ready condition's last transition.
func (r *Recorder) pendingStart(uid types.UID, before agentsv1alpha1.AgentSessionStatus, exit bool) (time.Time, bool) {
	r.mu.Lock()
	t, ok := r.pendingSince[uid]
	r.mu.Unlock()
	if ok {
		return t, true
	}
	if !before.PlanMode.Pending {
		return time.Time{}, false
	}
	if exit && before.Review != nil && before.Review.Phase == agentsv1alpha1.ReviewApproved && before.Review.DecidedAt != nil {
		return before.Review.DecidedAt.Time, true
	}
	if c := meta.FindStatusCondition(before.Conditions, agentsv1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		return c.LastTransitionTime.Time, true
	}
	return time.Time{}, false
}

// ObserveHeld records that a selection of s waits for the agent's next step boundary while the
// reconciler holds its pending write (controllers/pending_deferral.go): it waits from its first
// sight, as a written one waits from its write.
func (r *Recorder) ObserveHeld(s *agentsv1alpha1.AgentSession) {
	if r == nil || s == nil {
		return
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.pendingSince[s.UID]; !ok {
		r.pendingSince[s.UID] = now
	}
}

// ObserveStorm records that the reconciler entered a storm (controllers/backlog.go).
func (r *Recorder) ObserveStorm() {
	if r != nil {
		r.storms.Inc()
	}
}

func (r *Recorder) trackPending(uid types.UID, was, is bool, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case is && !was:
		if _, held := r.pendingSince[uid]; !held { // a held selection waits from its first sight
			r.pendingSince[uid] = now
		}
	case !is:
		delete(r.pendingSince, uid)
	}
}

// ackIsNew reports whether after answers a boundary before had not answered.
func ackIsNew(before, after *agentsv1alpha1.BoundaryAck) bool {
	if after == nil {
		return false
	}
	return before == nil || before.Turn != after.Turn || before.Step != after.Step || before.Seq != after.Seq
}

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func nonNegative(d time.Duration) float64 {
	if d < 0 {
		return 0
	}
	return d.Seconds()
}
