package metrics

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

func ptr[T any](v T) *T { return &v }

// clock is a settable clock for the Recorder.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newRecorder(t *testing.T) (*Recorder, *clock) {
	t.Helper()
	r := New()
	c := &clock{t: time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)}
	r.Now = c.now
	if err := r.Register(prometheus.NewRegistry()); err != nil {
		t.Fatalf("register: %v", err)
	}
	return r, c
}

func session(uid string) *agentsv1alpha1.AgentSession {
	s := &agentsv1alpha1.AgentSession{Spec: agentsv1alpha1.AgentSessionSpec{SessionID: uid}}
	s.UID = k8stypes.UID("uid-" + uid)
	return s
}

func count(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

func histCount(t *testing.T, h prometheus.Collector, name string) (n uint64, sum float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(h); err != nil {
		t.Fatalf("register: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetHistogram().GetSampleCount()
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return n, sum
}

func TestUserSelectionBetweenTurns(t *testing.T) {
	r, _ := newRecorder(t)
	s := session("a")
	before := agentsv1alpha1.AgentSessionStatus{}
	after := agentsv1alpha1.AgentSessionStatus{ObservedGeneration: 1, PlanMode: agentsv1alpha1.PlanModeStatus{
		Active: true, Selection: ptr(true), NextSeq: 1, LastTransitionTime: ptr(metav1.Now()),
		Notice: &agentsv1alpha1.OwedNotice{Seq: 0, Text: harness.NoticePlanOn}}}
	r.ObserveStatus(s, before, after)
	if got := count(t, r.transitions.WithLabelValues(CauseUserBetweenTurns, "true")); got != 1 {
		t.Fatalf("transitions{user_between_turns,true} = %v, want 1", got)
	}
	if got := count(t, r.selections.WithLabelValues(SelectionCommitted)); got != 1 {
		t.Fatalf("selections{committed} = %v, want 1", got)
	}
	if got := count(t, r.notices); got != 1 {
		t.Fatalf("notices = %v, want 1", got)
	}
	// Writing the same status again (another reconcile) counts nothing more.
	r.ObserveStatus(s, after, after)
	if got := count(t, r.transitions.WithLabelValues(CauseUserBetweenTurns, "true")); got != 1 {
		t.Fatalf("transitions after a no-op write = %v, want 1", got)
	}
}

func TestQueuedThenCommittedAtBoundary(t *testing.T) {
	r, clk := newRecorder(t)
	s := session("b")
	idle := agentsv1alpha1.AgentSessionStatus{ObservedGeneration: 1, PlanMode: agentsv1alpha1.PlanModeStatus{NextSeq: 5, TurnOpen: true}}
	queued := *idle.DeepCopy()
	queued.ObservedGeneration = 2
	queued.PlanMode.Selection, queued.PlanMode.PendingActive, queued.PlanMode.Pending = ptr(true), ptr(true), true
	queued.PlanMode.PendingSource = agentsv1alpha1.PendingSourceUser
	r.ObserveStatus(s, idle, queued)
	if got := count(t, r.selections.WithLabelValues(SelectionQueued)); got != 1 {
		t.Fatalf("selections{queued} = %v, want 1", got)
	}

	clk.t = clk.t.Add(1500 * time.Millisecond)
	committed := *queued.DeepCopy()
	committed.PlanMode.Active, committed.PlanMode.Pending, committed.PlanMode.PendingActive, committed.PlanMode.PendingSource = true, false, nil, ""
	committed.PlanMode.NextSeq = 9
	committed.PlanMode.LastTransitionTime = ptr(metav1.NewTime(clk.t))
	committed.PlanMode.LastBoundary = &agentsv1alpha1.BoundaryAck{Turn: 1, Step: 2, Seq: 8, Result: agentsv1alpha1.BoundaryAdmitted, Active: true, NextSeq: 9}
	r.ObserveStatus(s, queued, committed)
	if got := count(t, r.transitions.WithLabelValues(CauseUserAtBoundary, "true")); got != 1 {
		t.Fatalf("transitions{user_at_boundary} = %v, want 1", got)
	}
	if got := count(t, r.boundaryAcks.WithLabelValues("Admitted", AckCommitted)); got != 1 {
		t.Fatalf("boundary_acks{Admitted,committed} = %v, want 1", got)
	}
	n, sum := histCount(t, r.pendingToCommit, "planmode_pending_to_commit_seconds")
	if n != 1 || sum != 1.5 {
		t.Fatalf("pending_to_commit: %d samples, sum %v; want 1 sample of 1.5s", n, sum)
	}

	// The next step's boundary: answered, nothing appended.
	next := *committed.DeepCopy()
	next.PlanMode.LastBoundary = &agentsv1alpha1.BoundaryAck{Turn: 1, Step: 3, Seq: 12, Result: agentsv1alpha1.BoundaryAdmitted, Active: true, NextSeq: 12}
	r.ObserveStatus(s, committed, next)
	if got := count(t, r.boundaryAcks.WithLabelValues("Admitted", AckUnchanged)); got != 1 {
		t.Fatalf("boundary_acks{Admitted,unchanged} = %v, want 1", got)
	}

	// An hour later the user leaves plan mode between turns: one plan-mode period of 1h.
	clk.t = clk.t.Add(time.Hour)
	off := *next.DeepCopy()
	off.PlanMode.Active, off.PlanMode.Selection, off.PlanMode.TurnOpen = false, ptr(false), false
	r.ObserveStatus(s, next, off)
	if got := count(t, r.transitions.WithLabelValues(CauseUserBetweenTurns, "false")); got != 1 {
		t.Fatalf("transitions{user_between_turns,false} = %v, want 1", got)
	}
	n, sum = histCount(t, r.planModePeriod, "planmode_plan_mode_period_seconds")
	if n != 1 || sum != 3600 {
		t.Fatalf("plan_mode_period: %d samples, sum %v; want one of 3600s", n, sum)
	}
}

// A selection made during a turn whose pending write the reconciler held is taken on and
// committed by the answer to the agent's report: it is counted as queued, and as pending from
// its first sight.
func TestHeldThenCommittedAtBoundary(t *testing.T) {
	r, clk := newRecorder(t)
	s := session("held")
	idle := agentsv1alpha1.AgentSessionStatus{ObservedGeneration: 1, PlanMode: agentsv1alpha1.PlanModeStatus{NextSeq: 5, TurnOpen: true}}
	r.ObserveHeld(s)
	clk.t = clk.t.Add(2 * time.Second)
	r.ObserveHeld(s) // a second reconcile while held keeps the first sight
	clk.t = clk.t.Add(time.Second)
	committed := *idle.DeepCopy()
	committed.ObservedGeneration = 2
	committed.PlanMode.Active, committed.PlanMode.Selection, committed.PlanMode.NextSeq = true, ptr(true), 9
	committed.PlanMode.LastTransitionTime = ptr(metav1.NewTime(clk.t))
	committed.PlanMode.LastBoundary = &agentsv1alpha1.BoundaryAck{Turn: 1, Step: 2, Seq: 8, Result: agentsv1alpha1.BoundaryAdmitted, Active: true, NextSeq: 9}
	r.ObserveStatus(s, idle, committed)
	if got := count(t, r.selections.WithLabelValues(SelectionQueued)); got != 1 {
		t.Fatalf("selections{queued} = %v, want 1", got)
	}
	if got := count(t, r.selections.WithLabelValues(SelectionNoop)); got != 0 {
		t.Fatalf("selections{noop} = %v, want 0", got)
	}
	if got := count(t, r.transitions.WithLabelValues(CauseUserAtBoundary, "true")); got != 1 {
		t.Fatalf("transitions{user_at_boundary} = %v, want 1", got)
	}
	n, sum := histCount(t, r.pendingToCommit, "planmode_pending_to_commit_seconds")
	if n != 1 || sum != 3 {
		t.Fatalf("pending_to_commit: %d samples, sum %v; want 1 sample of 3s", n, sum)
	}
}

// A manager restarted while a selection was pending has no in-memory start: the Ready
// condition's lastTransitionTime stands in.
func TestPendingStartAfterRestart(t *testing.T) {
	r, clk := newRecorder(t)
	s := session("c")
	since := clk.t.Add(-7 * time.Second)
	queued := agentsv1alpha1.AgentSessionStatus{ObservedGeneration: 2, PlanMode: agentsv1alpha1.PlanModeStatus{
		Selection: ptr(true), PendingActive: ptr(true), Pending: true, PendingSource: agentsv1alpha1.PendingSourceUser, TurnOpen: true, NextSeq: 4},
		Conditions: []metav1.Condition{{Type: agentsv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1alpha1.ReasonSelectionPending, LastTransitionTime: metav1.NewTime(since)}}}
	committed := *queued.DeepCopy()
	committed.PlanMode.Active, committed.PlanMode.Pending, committed.PlanMode.PendingActive = true, false, nil
	committed.PlanMode.LastBoundary = &agentsv1alpha1.BoundaryAck{Turn: 1, Step: 2, Seq: 4, Result: agentsv1alpha1.BoundaryAdmitted, Active: true, NextSeq: 5}
	r.ObserveStatus(s, queued, committed)
	n, sum := histCount(t, r.pendingToCommit, "planmode_pending_to_commit_seconds")
	if n != 1 || sum != 7 {
		t.Fatalf("pending_to_commit: %d samples, sum %v; want one of 7s", n, sum)
	}
}

func TestApprovedExitAndReview(t *testing.T) {
	r, clk := newRecorder(t)
	s := session("d")
	posted := clk.t.Add(-30 * time.Second)
	agent := &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: "r1", Plan: "# P", RequestedAt: ptr(metav1.NewTime(posted))}}
	inPlan := agentsv1alpha1.AgentSessionStatus{ObservedGeneration: 1, Agent: agent, PlanMode: agentsv1alpha1.PlanModeStatus{Active: true, Selection: ptr(true), TurnOpen: true, NextSeq: 10,
		LastTransitionTime: ptr(metav1.NewTime(clk.t.Add(-time.Minute)))}}
	open := *inPlan.DeepCopy()
	open.Review = &agentsv1alpha1.ReviewStatus{ID: "r1", Phase: agentsv1alpha1.ReviewPending}
	r.ObserveStatus(s, inPlan, open)
	if got := count(t, r.reviewsOpened); got != 1 {
		t.Fatalf("reviews_opened = %v, want 1", got)
	}
	approved := *open.DeepCopy()
	approved.Review.Phase, approved.Review.DecidedAt = agentsv1alpha1.ReviewApproved, ptr(metav1.NewTime(clk.t))
	approved.PlanMode.PendingActive, approved.PlanMode.PendingSource, approved.PlanMode.Pending = ptr(false), agentsv1alpha1.PendingSourceExit, true
	r.ObserveStatus(s, open, approved)
	if got := count(t, r.reviews.WithLabelValues("Approved")); got != 1 {
		t.Fatalf("reviews{Approved} = %v, want 1", got)
	}
	n, sum := histCount(t, r.reviewLatency, "planmode_review_decision_seconds")
	if n != 1 || sum != 30 {
		t.Fatalf("review_decision: %d samples, sum %v; want one of 30s", n, sum)
	}

	clk.t = clk.t.Add(2 * time.Second)
	exited := *approved.DeepCopy()
	exited.PlanMode.Active, exited.PlanMode.Pending, exited.PlanMode.PendingActive, exited.PlanMode.PendingSource = false, false, nil, ""
	exited.PlanMode.LastBoundary = &agentsv1alpha1.BoundaryAck{Turn: 1, Step: 3, Seq: 14, Result: agentsv1alpha1.BoundaryAdmitted, NextSeq: 15}
	r.ObserveStatus(s, approved, exited)
	if got := count(t, r.transitions.WithLabelValues(CauseExitAtBoundary, "false")); got != 1 {
		t.Fatalf("transitions{exit_at_boundary} = %v, want 1", got)
	}
	if got := count(t, r.notices); got != 0 {
		t.Fatalf("an approved exit is never narrated, notices = %v", got)
	}
	n, sum = histCount(t, r.pendingToCommit, "planmode_pending_to_commit_seconds")
	if n != 1 || sum != 2 {
		t.Fatalf("pending_to_commit{exit}: %d samples, sum %v; want one of 2s", n, sum)
	}

	// A later plan the agent withdraws.
	withdrawnBefore := *exited.DeepCopy()
	withdrawnBefore.Review = &agentsv1alpha1.ReviewStatus{ID: "r2", Phase: agentsv1alpha1.ReviewPending}
	withdrawn := *withdrawnBefore.DeepCopy()
	withdrawn.Review = nil
	r.ObserveStatus(s, withdrawnBefore, withdrawn)
	if got := count(t, r.reviews.WithLabelValues("Withdrawn")); got != 1 {
		t.Fatalf("reviews{Withdrawn} = %v, want 1", got)
	}
}

func TestForkAndFailedAcks(t *testing.T) {
	r, _ := newRecorder(t)
	s := session("e")
	s.Spec.Fork = &agentsv1alpha1.ForkSource{SessionID: "parent"}
	r.ObserveStatus(s, agentsv1alpha1.AgentSessionStatus{}, agentsv1alpha1.AgentSessionStatus{ObservedGeneration: 1,
		PlanMode: agentsv1alpha1.PlanModeStatus{Active: true, NextSeq: 12, LastTransitionTime: ptr(metav1.Now())}})
	if got := count(t, r.transitions.WithLabelValues(CauseFork, "true")); got != 1 {
		t.Fatalf("transitions{fork} = %v, want 1", got)
	}

	base := agentsv1alpha1.AgentSessionStatus{ObservedGeneration: 1, PlanMode: agentsv1alpha1.PlanModeStatus{NextSeq: 3, TurnOpen: true}}
	bad := *base.DeepCopy()
	bad.PlanMode.LastBoundary = &agentsv1alpha1.BoundaryAck{Turn: 1, Step: 1, Seq: 9, Result: agentsv1alpha1.BoundaryFailed,
		Reason: agentsv1alpha1.ReasonInvalidBoundary, Message: "invalid boundary report: status.agent.boundary.seq is 9"}
	r.ObserveStatus(s, base, bad)
	down := *bad.DeepCopy()
	down.PlanMode.LastBoundary = &agentsv1alpha1.BoundaryAck{Turn: 1, Step: 1, Seq: 3, Result: agentsv1alpha1.BoundaryFailed,
		Reason: agentsv1alpha1.ReasonLogStoreError, Message: "log store: connection refused"}
	r.ObserveStatus(s, bad, down)
	if got := count(t, r.boundaryAcks.WithLabelValues("Failed", AckInvalidReport)); got != 1 {
		t.Fatalf("boundary_acks{Failed,invalid_report} = %v, want 1", got)
	}
	if got := count(t, r.boundaryAcks.WithLabelValues("Failed", AckLogStore)); got != 1 {
		t.Fatalf("boundary_acks{Failed,log_store} = %v, want 1", got)
	}
}

// The store wrapper against a real SQLite store: ok, conflict, not_found and error results.
func TestInstrumentStore(t *testing.T) {
	r, _ := newRecorder(t)
	ctx := context.Background()
	raw, err := sessionlog.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "log.db"))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	st := InstrumentStore(raw, r)
	if _, err := st.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(0, true)}); err != nil {
		t.Fatalf("append: %v", err)
	}
	if _, err := st.Append(ctx, "s", []harness.Event{harness.PlanModeEvent(0, false)}); !sessionlog.IsConflict(err) {
		t.Fatalf("second append at seq 0: want a conflict, got %v", err)
	}
	if _, err := st.Tail(ctx, "s"); err != nil {
		t.Fatalf("tail: %v", err)
	}
	if _, err := st.Info(ctx, "missing"); err == nil {
		t.Fatal("info of a missing session: want an error")
	}
	if err := raw.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := st.Tail(ctx, "s"); err == nil {
		t.Fatal("tail on a closed store: want an error")
	}
	for _, c := range []struct {
		op, result string
		want       float64
	}{{OpAppend, "ok", 1}, {OpAppend, "conflict", 1}, {OpTail, "ok", 1}, {OpInfo, "not_found", 1}, {OpTail, "error", 1}} {
		if got := count(t, r.storeOps.WithLabelValues(c.op, c.result)); got != c.want {
			t.Errorf("log_store_operations{%s,%s} = %v, want %v", c.op, c.result, got, c.want)
		}
	}
	if got := count(t, r.storeErrors.WithLabelValues(OpTail)); got != 1 {
		t.Errorf("log_store_errors{tail} = %v, want 1", got)
	}
	if got := count(t, r.storeErrors.WithLabelValues(OpAppend)); got != 0 {
		t.Errorf("a conflict is not a store error: log_store_errors{append} = %v", got)
	}
	// Every metric has a help text and the planmode_ prefix.
	reg := prometheus.NewPedanticRegistry()
	if err := New().Register(reg); err != nil {
		t.Fatalf("pedantic register: %v", err)
	}
	for _, c := range New().collectors() {
		ch := make(chan *prometheus.Desc, 4)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			if !strings.Contains(d.String(), `fqName: "planmode_`) {
				t.Errorf("metric without the planmode_ prefix: %s", d)
			}
		}
	}
}

// Every known series exists at zero before anything happens.
func TestSeriesStartAtZero(t *testing.T) {
	r, _ := newRecorder(t)
	for _, c := range []struct {
		v    prometheus.Collector
		want int
	}{{r.transitions, 8}, {r.selections, 4}, {r.boundaryAcks, 5}, {r.reviews, 6}, {r.storeOps, 12}, {r.storeErrors, 4}} {
		if got := testutil.CollectAndCount(c.v); got != c.want {
			t.Errorf("%d series at start, want %d", got, c.want)
		}
	}
	if got := count(t, r.transitions.WithLabelValues(CauseUserAtBoundary, "true")); got != 0 {
		t.Errorf("transitions at start = %v", got)
	}
}

// planmode_storms_total is registered with the Recorder's other metrics and counts each storm
// the reconciler reports entering.
func TestStormsEnteredAreCountedAndRegistered(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	r := New()
	if err := r.Register(reg); err != nil {
		t.Fatalf("register: %v", err)
	}
	r.ObserveStorm()
	r.ObserveStorm()
	(*Recorder)(nil).ObserveStorm() // metrics off: nothing to count, and no panic
	want := `# HELP planmode_storms_total Storms the reconciler entered: bursts of session changes and status writes during which its Events wait.
# TYPE planmode_storms_total counter
planmode_storms_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "planmode_storms_total"); err != nil {
		t.Fatal(err)
	}
}
