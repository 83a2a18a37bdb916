package controllers

// Fuzz targets for the reconciler's bad-input paths (issue 9): step-boundary reports (turn or
// step going backwards, a boundary for a turn that is not open, huge and negative values)
// against arbitrary valid logs and statuses, and review decisions. They run the real compute
// on a real SQLite log; the API side is controller-runtime's fake client, which only serves
// the PlanModeConfig read (compute writes nothing to the API). Run one with
//
//	go test ./controllers -run '^$' -fuzz FuzzBoundaryReport -fuzztime 60s
//
// Properties: no panic; at most one plan/mode appended per reconcile; the log stays free of
// duplicates, plan/modes inside a step and two at one boundary (pkg/invariant); a refused
// report is answered Failed with a message naming status.agent.boundary and appends nothing;
// an admitted answer matches the log; a review is approved only by exactly {Approve, no
// feedback} for its own id, records the silent exit, and a closed review never changes.

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// fzEnv is one fuzz worker's reconciler: a real SQLite store and a fake API holding the
// default PlanModeConfig of namespace "fz" (namespace "fz-noconfig" has none).
type fzEnv struct {
	r     *AgentSessionReconciler
	store sessionlog.Store
}

var fzSeq atomic.Int64

func newFzEnv(tb testing.TB) *fzEnv {
	tb.Helper()
	store, err := sessionlog.OpenSQLite(context.Background(), filepath.Join(tb.TempDir(), "fz.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = store.Close() })
	sch := runtime.NewScheme()
	if err := agentsv1alpha1.AddToScheme(sch); err != nil {
		tb.Fatal(err)
	}
	cfg := &agentsv1alpha1.PlanModeConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fz", Name: agentsv1alpha1.DefaultPlanModeConfigName, Generation: 1},
		Spec:       agentsv1alpha1.PlanModeConfigSpec{Section: "plan guidance"},
	}
	c := fake.NewClientBuilder().WithScheme(sch).WithObjects(cfg).Build()
	return &fzEnv{r: &AgentSessionReconciler{Client: c, Store: store}, store: store}
}

// fzLog builds a valid log from ops (one byte each) and returns it with the folded state:
// 0 turn/start, 1 a whole step, 2 an open step, 3 step/end, 4 turn/end, 5 plan/mode toggle (only
// where the manager may append one), 6 request/header in an open step, 7 a notice-free user
// message in an open step.
func fzLog(ops []byte) []harness.Event {
	var evs []harness.Event
	add := func(typ, data string) {
		evs = append(evs, harness.Event{Type: typ, Seq: int64(len(evs)), Time: 1, Data: []byte(data)})
	}
	var turn, step int64
	turnOpen, stepOpen, active, pmAtBoundary := false, false, false, false
	if len(ops) > 64 {
		ops = ops[:64]
	}
	for _, op := range ops {
		switch op % 8 {
		case 0:
			if !turnOpen {
				turn++
				step = 0
				add("turn/start", fmt.Sprintf(`{"turn":%d}`, turn))
				turnOpen, pmAtBoundary = true, false
			}
		case 1, 2:
			if turnOpen && !stepOpen {
				step++
				add("step/start", fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step))
				add("request/header", `{"header":{},"reason":"initial"}`)
				stepOpen, pmAtBoundary = true, false
				if op%8 == 1 {
					add("step/end", fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step))
					stepOpen = false
				}
			}
		case 3:
			if stepOpen {
				add("step/end", fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step))
				stepOpen = false
			}
		case 4:
			if turnOpen {
				add("turn/end", fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, turn))
				turnOpen, stepOpen = false, false
			}
		case 5:
			if !stepOpen && (!turnOpen || !pmAtBoundary) {
				active = !active
				add("plan/mode", fmt.Sprintf(`{"active":%t}`, active))
				pmAtBoundary = turnOpen
			}
		case 6:
			if stepOpen {
				add("request/header", `{"header":{"system":"x"},"reason":"change"}`)
			}
		case 7:
			if stepOpen {
				add("user/message", `{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"m"}`)
			}
		}
	}
	for i := range evs {
		if evs[i].Type == "user/message" {
			evs[i].SurfaceOp = []byte(`"append"`)
		}
	}
	return evs
}

func fzBool(b byte) *bool {
	switch b % 3 {
	case 0:
		return nil
	case 1:
		v := true
		return &v
	}
	v := false
	return &v
}

// fzSeed stores the log and returns a session whose status mirrors the tail as a previous
// reconcile would have left it (plus the fuzzed fields).
func (e *fzEnv) fzSeed(t *testing.T, ops []byte, ns string) (*agentsv1alpha1.AgentSession, []harness.Event) {
	t.Helper()
	id := fmt.Sprintf("fz-%d", fzSeq.Add(1))
	evs := fzLog(ops)
	if _, err := e.store.Seed(context.Background(), sessionlog.SessionInfo{ID: id, CreatedAt: 1}, evs, sessionlog.Owner{}); err != nil {
		t.Fatalf("seed a generated log: %v", err)
	}
	tail, err := e.store.Tail(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	s := &agentsv1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s", Generation: 1, UID: types.UID("uid-" + id)},
		Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: id},
	}
	a := tail.Active
	s.Status.PlanMode = agentsv1alpha1.PlanModeStatus{Active: tail.Active, Selection: &a, NextSeq: tail.NextSeq, TurnOpen: tail.TurnOpen, ToldActive: tail.LastShown}
	return s, evs
}

// fzAfter reads the log after compute and checks the log-level properties.
func (e *fzEnv) fzAfter(t *testing.T, s *agentsv1alpha1.AgentSession, before []harness.Event, out *sessionScope) []harness.Event {
	t.Helper()
	after, err := e.store.ReadFrom(context.Background(), s.Spec.SessionID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	added := after[len(before):]
	if len(added) > 1 {
		t.Fatalf("one reconcile appended %d events", len(added))
	}
	for _, ev := range added {
		if ev.Type != harness.TypePlanMode {
			t.Fatalf("the manager appended %s", ev.Type)
		}
	}
	for _, v := range invariant.Check(invariant.Input{Events: after}) {
		switch v.Kind {
		case invariant.Duplicate, invariant.InsideStep, invariant.SameBoundary, invariant.SeqGap, invariant.InvalidPlanMode:
			t.Fatalf("after the reconcile: %s", v)
		}
	}
	st := out.status.PlanMode
	if st.NextSeq != int64(len(after)) || st.Active != harness.FoldPlanMode(after) {
		t.Fatalf("status says nextSeq %d active %v; the log has %d events folding to %v", st.NextSeq, st.Active, len(after), harness.FoldPlanMode(after))
	}
	return after
}

func FuzzBoundaryReport(f *testing.F) {
	e := newFzEnv(f)
	// ops, spec selection, prev pending, boundary turn/step/seq, whether a report is present.
	f.Add([]byte{0, 1}, byte(1), byte(0), int64(1), int64(2), int64(5), true, false)          // valid: toggle on at (1,2)
	f.Add([]byte{0, 1}, byte(1), byte(1), int64(1), int64(2), int64(5), true, false)          // already pending
	f.Add([]byte{0, 1, 4}, byte(2), byte(0), int64(1), int64(2), int64(5), true, false)       // turn not open
	f.Add([]byte{0, 1, 1}, byte(1), byte(0), int64(1), int64(1), int64(8), true, false)       // step backwards
	f.Add([]byte{0, 1, 4, 0, 1}, byte(1), byte(0), int64(1), int64(2), int64(9), true, false) // turn backwards
	f.Add([]byte{0, 2}, byte(1), byte(0), int64(1), int64(2), int64(4), true, false)          // step still open
	f.Add([]byte{0, 1}, byte(1), byte(0), int64(1), int64(2), int64(math.MaxInt64), true, false)
	f.Add([]byte{0, 1}, byte(1), byte(0), int64(math.MinInt64), int64(-1), int64(-7), true, true)
	f.Add([]byte{5, 0, 1, 5}, byte(2), byte(0), int64(1), int64(2), int64(6), true, false) // own plan/mode, unacked
	f.Add([]byte{}, byte(1), byte(0), int64(0), int64(0), int64(0), false, false)          // between turns
	f.Fuzz(func(t *testing.T, ops []byte, spec, pending byte, bt, bs, bseq int64, report, noConfig bool) {
		ns := "fz"
		if noConfig {
			ns = "fz-noconfig"
		}
		s, before := e.fzSeed(t, ops, ns)
		s.Spec.PlanMode.Active = fzBool(spec)
		if p := fzBool(pending); p != nil {
			s.Status.PlanMode.PendingActive = p
			s.Status.PlanMode.PendingSource = agentsv1alpha1.PendingSourceUser
			if pending%2 == 0 && !*p {
				s.Status.PlanMode.PendingSource = agentsv1alpha1.PendingSourceExit // an exit is always {false}
			}
		}
		if report {
			s.Status.Agent = &agentsv1alpha1.AgentReport{Boundary: &agentsv1alpha1.StepBoundary{Turn: bt, Step: bs, Seq: bseq}}
		}
		tail, _ := e.store.Tail(context.Background(), s.Spec.SessionID)
		out, err := e.r.compute(context.Background(), s)
		if err != nil {
			t.Fatalf("compute: %v", err)
		}
		after := e.fzAfter(t, s, before, out)
		ack := out.status.PlanMode.LastBoundary
		if !report {
			if ack != nil {
				t.Fatalf("an answer with no report: %+v", ack)
			}
			return
		}
		if ack == nil || ack.Turn != bt || ack.Step != bs || ack.Seq != bseq {
			t.Fatalf("report (%d,%d,%d) not answered: %+v", bt, bs, bseq, ack)
		}
		valid := tail.TurnOpen && bt == tail.Turn && !tail.StepOpen && bs > tail.Step &&
			(bseq == tail.NextSeq || (bseq == tail.NextSeq-1 && tail.LastPlanModeSeq == bseq))
		// A report at the next seq after a plan/mode that already landed at this boundary (the
		// same step reported again) may be refused or admitted, but never appends a second one.
		reReport := bseq == tail.NextSeq && tail.LastPlanModeSeq > tail.LastStepStartSeq && tail.LastPlanModeSeq > lastTurnStart(before)
		switch ack.Result {
		case agentsv1alpha1.BoundaryFailed:
			if strings.HasPrefix(ack.Message, invalidBoundaryMsgPrefix) {
				if valid && bseq == tail.NextSeq && !reReport {
					t.Fatalf("a valid report refused: %s (tail %+v)", ack.Message, tail)
				}
				if !strings.Contains(ack.Message, "status.agent.boundary") {
					t.Fatalf("refusal does not name the field: %s", ack.Message)
				}
				if tail.TurnOpen && len(after) != len(before) {
					t.Fatalf("a refused report led to an append inside the turn")
				}
				live := tail.TurnOpen && bt == tail.Turn
				ready := findCond(out.status.Conditions, agentsv1alpha1.ConditionReady)
				if live && (ready == nil ||
					(ready.Reason != agentsv1alpha1.ReasonInvalidBoundary && ready.Reason != agentsv1alpha1.ReasonConfigMissing)) {
					t.Fatalf("a refused report from a live turn without an InvalidBoundaryReport condition: %+v", ready)
				}
				warned := false
				for _, ev := range out.events {
					warned = warned || (ev.typ == "Warning" && ev.reason == agentsv1alpha1.ReasonInvalidBoundary)
				}
				// The Warning goes with the condition: once, when Ready first shows the refusal.
				if shown := ready != nil && ready.Reason == agentsv1alpha1.ReasonInvalidBoundary; shown != warned {
					t.Fatalf("Ready %+v shows the refusal: %v; a Warning Event: %v (%+v)", ready, shown, warned, out.events)
				}
			} else {
				t.Fatalf("Failed for another reason on a healthy store: %s", ack.Message)
			}
		case agentsv1alpha1.BoundaryAdmitted:
			if !valid {
				t.Fatalf("an invalid report admitted: (%d,%d,%d) against tail %+v", bt, bs, bseq, tail)
			}
			vs := invariant.Check(invariant.Input{Events: after, Acks: []invariant.Ack{*invariant.AckFrom(ack)}})
			for _, v := range vs {
				if v.Kind == invariant.AckNotInLog {
					t.Fatalf("admitted answer not in the log: %s", v)
				}
			}
		case agentsv1alpha1.BoundaryDismissed:
			// Protocol v2: only a report the log has moved past (its turn ended, or events at
			// and after its seq that are not the plan/mode answering it) is dismissed, and that
			// needs no one: no append, no Stalled, no Warning.
			passed := bt < tail.Turn || bt == tail.Turn && (!tail.TurnOpen ||
				bseq < tail.NextSeq && (bseq != tail.NextSeq-1 || tail.LastPlanModeSeq != bseq))
			if !passed {
				t.Fatalf("a report the log has not moved past dismissed: (%d,%d,%d) against tail %+v", bt, bs, bseq, tail)
			}
			if tail.TurnOpen && len(after) != len(before) {
				t.Fatalf("a dismissed report led to an append inside the turn")
			}
			if st := findCond(out.status.Conditions, agentsv1alpha1.ConditionStalled); st != nil && st.Reason == agentsv1alpha1.ReasonInvalidBoundary {
				t.Fatalf("a dismissed report stalls the session: %+v", st)
			}
			for _, ev := range out.events {
				if ev.reason == agentsv1alpha1.ReasonInvalidBoundary {
					t.Fatalf("a dismissed report with a Warning Event: %+v", ev)
				}
			}
		default:
			t.Fatalf("answer with result %q", ack.Result)
		}
	})
}

func lastTurnStart(evs []harness.Event) int64 {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == harness.TypeTurnStart {
			return evs[i].Seq
		}
	}
	return -1
}

func findCond(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

func FuzzReviewDecision(f *testing.F) {
	e := newFzEnv(f)
	f.Add([]byte{5, 0, 1}, "r1", "r1", "Approve", "", byte(0), true)
	f.Add([]byte{5, 0, 1}, "r1", "r1", "Approve", "tighten step 2", byte(0), true)
	f.Add([]byte{5, 0, 1}, "r1", "r2", "Approve", "", byte(0), true)
	f.Add([]byte{5, 0, 1}, "r1", "r1", "KeepPlanning", "more", byte(0), true)
	f.Add([]byte{5, 0, 1}, "r1", "r1", "Dismiss", "", byte(0), true)
	f.Add([]byte{5, 0, 1}, "r1", "r1", "approve", "", byte(0), true)
	f.Add([]byte{0, 1}, "r1", "r1", "Approve", "", byte(0), true) // not in plan mode
	f.Add([]byte{5, 0, 1}, "r1", "r1", "Approve", "", byte(1), true)
	f.Add([]byte{5, 0, 1}, "", "", "", "", byte(3), false)
	f.Fuzz(func(t *testing.T, ops []byte, reqID, decID, decision, feedback string, prevPhase byte, hasDecision bool) {
		s, before := e.fzSeed(t, ops, "fz")
		tail, _ := e.store.Tail(context.Background(), s.Spec.SessionID)
		s.Status.Agent = &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: reqID, Plan: "# Plan\n- do it", Turn: tail.Turn}}
		phases := []agentsv1alpha1.ReviewPhase{"", agentsv1alpha1.ReviewPending, agentsv1alpha1.ReviewApproved,
			agentsv1alpha1.ReviewKeptPlanning, agentsv1alpha1.ReviewDismissed, agentsv1alpha1.ReviewExpired, agentsv1alpha1.ReviewRejected}
		prev := phases[int(prevPhase)%len(phases)]
		if prev != "" {
			s.Status.Review = &agentsv1alpha1.ReviewStatus{ID: reqID, Phase: prev, Message: "earlier", PlanSHA256: planmode.PlanSHA256(s.Status.Agent.Review.Plan)}
		}
		if hasDecision {
			s.Spec.Review = &agentsv1alpha1.ReviewDecision{ReviewID: decID, Decision: agentsv1alpha1.ReviewDecisionType(decision), Feedback: feedback}
		}
		out, err := e.r.compute(context.Background(), s)
		if err != nil {
			t.Fatalf("compute: %v", err)
		}
		after := e.fzAfter(t, s, before, out)
		if len(after) != len(before) {
			t.Fatalf("a review decision appended to the log")
		}
		rs := out.status.Review
		pm := out.status.PlanMode
		if prev != "" && prev != agentsv1alpha1.ReviewPending {
			if rs == nil || rs.Phase != prev || rs.Message != "earlier" {
				t.Fatalf("a closed review (%s) changed: %+v", prev, rs)
			}
			return
		}
		if rs == nil {
			t.Fatalf("a posted plan got no review status")
		}
		if !tail.Active && prev == "" {
			// Checked when the review opens (the harness checks the logged state at the call);
			// a review already pending stays open if plan mode ends meanwhile.
			if rs.Phase != agentsv1alpha1.ReviewRejected {
				t.Fatalf("a plan posted outside plan mode was %s", rs.Phase)
			}
			return
		}
		consent := hasDecision && decID == reqID && decision == string(agentsv1alpha1.ReviewApprove) && feedback == ""
		if (rs.Phase == agentsv1alpha1.ReviewApproved) != consent {
			t.Fatalf("phase %s for decision %+v on review %q", rs.Phase, s.Spec.Review, reqID)
		}
		if consent {
			if pm.PendingActive == nil || *pm.PendingActive || pm.PendingSource != agentsv1alpha1.PendingSourceExit || rs.Message != harness.ExitApprovedText {
				t.Fatalf("approval did not record the silent exit: %+v / %+v", pm, rs)
			}
		}
		if !hasDecision || decID != reqID {
			if rs.Phase != agentsv1alpha1.ReviewPending {
				t.Fatalf("no decision for this review, yet phase %s", rs.Phase)
			}
		}
	})
}
