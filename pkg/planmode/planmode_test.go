package planmode

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// bench is the harness's own plan-mode test bench reduced to what this package decides: a
// real event slice, a process-local pending selection, and boundaries that flush it.
type bench struct {
	t          *testing.T
	events     []harness.Event
	pending    *Pending
	notices    []string // notices recorded (between-turns ones are delivered at the next step)
	owed       string   // notice owed by a between-turns commit
	failAppend bool
}

var errInjected = errors.New("injected append failure")

func (b *bench) add(typ string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		b.t.Fatal(err)
	}
	b.events = append(b.events, harness.Event{Type: typ, Seq: int64(len(b.events)), Data: raw})
}

func (b *bench) appendPlanMode(active bool) error {
	if b.failAppend {
		return errInjected
	}
	b.events = append(b.events, harness.PlanModeEvent(int64(len(b.events)), active))
	return nil
}

func (b *bench) state() State {
	return State{Logged: harness.FoldPlanMode(b.events), Pending: b.pending, TurnOpen: harness.HasOpenTurn(b.events), LastShown: harness.PlanModeAtLastHeader(b.events)}
}

func (b *bench) openTurn() { b.add(harness.TypeTurnStart, map[string]int{"turn": 1}) }
func (b *bench) closeTurn() {
	b.add(harness.TypeTurnEnd, map[string]any{"turn": 1, "reason": map[string]string{"kind": "completed"}})
}
func (b *bench) header() {
	b.add(harness.TypeRequestHeader, map[string]any{"header": map[string]any{}, "reason": "initial"})
}

func (b *bench) set(x bool) (Outcome, error) {
	d := Set(b.state(), x)
	if d.Append != nil {
		if err := b.appendPlanMode(*d.Append); err != nil {
			return "", err // pending unchanged
		}
		if d.Notice != "" {
			b.owed = d.Notice
		}
	}
	b.pending = d.Pending
	return d.Outcome, nil
}

// boundary flushes at an accepted step boundary; it returns the proposal's error, if any.
func (b *bench) boundary() error {
	d := Flush(b.state())
	if d.Append != nil {
		if err := b.appendPlanMode(*d.Append); err != nil {
			return err // the proposal fails, pending kept
		}
	}
	if d.ClearPending {
		b.pending = nil
	}
	if d.Append != nil {
		b.owed = "" // superseded by this step's own narration decision
	}
	if d.Notice != "" {
		b.notices = append(b.notices, d.Notice)
	} else if b.owed != "" {
		b.notices = append(b.notices, b.owed)
	}
	b.owed = ""
	b.add(harness.TypeStepStart, map[string]int{"turn": 1, "step": 1})
	return nil
}

// mustSet is set where the selection's append cannot fail.
func (b *bench) mustSet(x bool) Outcome {
	b.t.Helper()
	o, err := b.set(x)
	if err != nil {
		b.t.Fatalf("set(%v): %v", x, err)
	}
	return o
}

// mustBoundary is boundary where the flush's append cannot fail.
func (b *bench) mustBoundary() {
	b.t.Helper()
	if err := b.boundary(); err != nil {
		b.t.Fatalf("boundary: %v", err)
	}
}

func (b *bench) planModes() int {
	n := 0
	for _, e := range b.events {
		if e.Type == harness.TypePlanMode {
			n++
		}
	}
	return n
}

func (b *bench) get() (bool, *bool) {
	s := b.state()
	if s.Pending == nil {
		return s.Logged, nil
	}
	p := s.Pending.Active
	return s.Logged, &p
}

func ptr(b bool) *bool { return &b }

func expectGet(t *testing.T, b *bench, active bool, pending *bool) {
	t.Helper()
	a, p := b.get()
	if a != active || (p == nil) != (pending == nil) || (p != nil && *p != *pending) {
		t.Fatalf("get() = {active:%v pending:%v}, want {active:%v pending:%v}", a, fmtPtr(p), active, fmtPtr(pending))
	}
}

func fmtPtr(p *bool) any {
	if p == nil {
		return "undefined"
	}
	return *p
}

// The set() decision table, row by row.
func TestSetDecisionTable(t *testing.T) {
	T, F := true, false
	cases := []struct {
		name    string
		logged  bool
		pending *Pending
		open    bool
		x       bool
		outcome Outcome
		append  *bool
		pendAft *Pending
	}{
		{"L=F no pending closed set(F) noop", F, nil, false, F, Noop, nil, nil},
		{"L=T no pending open set(T) noop", T, nil, true, T, Noop, nil, nil},
		{"L=F closed set(T) committed", F, nil, false, T, Committed, &T, nil},
		{"L=T closed set(F) committed", T, nil, false, F, Committed, &F, nil},
		{"L=F open set(T) queued", F, nil, true, T, Queued, nil, &Pending{T, true}},
		{"L=T open set(F) queued", T, nil, true, F, Queued, nil, &Pending{F, true}},
		{"L=F P=T open set(F) cancelled, residue kept", F, &Pending{T, true}, true, F, Cancelled, nil, &Pending{F, true}},
		{"L=F P=T open set(T) noop", F, &Pending{T, true}, true, T, Noop, nil, &Pending{T, true}},
		{"L=F P=T closed set(F) cancelled, deleted", F, &Pending{T, true}, false, F, Cancelled, nil, nil},
		{"L=F P=T closed set(T) noop, stays pending", F, &Pending{T, true}, false, T, Noop, nil, &Pending{T, true}},
		{"L=T P=F(exit) open set(T) cancels the exit", T, &Pending{F, false}, true, T, Cancelled, nil, &Pending{T, true}},
		{"L=T P=F open set(F) noop", T, &Pending{F, true}, true, F, Noop, nil, &Pending{F, true}},
		{"L=F P=F residue set(F) noop (open)", F, &Pending{F, true}, true, F, Noop, nil, &Pending{F, true}},
		{"L=F P=F residue set(F) noop (closed)", F, &Pending{F, true}, false, F, Noop, nil, &Pending{F, true}},
		{"L=F P=F residue open set(T) queued", F, &Pending{F, true}, true, T, Queued, nil, &Pending{T, true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Set(State{Logged: c.logged, Pending: c.pending, TurnOpen: c.open}, c.x)
			if d.Outcome != c.outcome {
				t.Fatalf("outcome %s, want %s", d.Outcome, c.outcome)
			}
			if (d.Append == nil) != (c.append == nil) || (d.Append != nil && *d.Append != *c.append) {
				t.Fatalf("append %v, want %v", fmtPtr(d.Append), fmtPtr(c.append))
			}
			if (d.Pending == nil) != (c.pendAft == nil) || (d.Pending != nil && *d.Pending != *c.pendAft) {
				t.Fatalf("pending %+v, want %+v", d.Pending, c.pendAft)
			}
		})
	}
}

func TestGetReadsTheFoldedState(t *testing.T) {
	b := &bench{t: t}
	expectGet(t, b, false, nil)
	b.add(harness.TypePlanMode, harness.PlanMode{Active: true})
	expectGet(t, b, true, nil)
}

func TestSelectsInactiveAsExitTargetDuringOpenTurn(t *testing.T) {
	b := &bench{t: t}
	b.add(harness.TypePlanMode, harness.PlanMode{Active: true})
	b.openTurn()
	if o, _ := b.set(false); o != Queued {
		t.Fatalf("set(false) = %s, want queued", o)
	}
	expectGet(t, b, true, ptr(false))
}

func TestDropsNoopSet(t *testing.T) {
	b := &bench{t: t}
	b.openTurn()
	for i, step := range []struct {
		x    bool
		want Outcome
	}{{false, Noop}, {true, Queued}, {true, Noop}} {
		if o, _ := b.set(step.x); o != step.want {
			t.Fatalf("call %d set(%v) = %s, want %s", i, step.x, o, step.want)
		}
	}
	expectGet(t, b, false, ptr(true))
}

func TestBetweenTurnsSelectionCommitsImmediately(t *testing.T) {
	b := &bench{t: t}
	if o, _ := b.set(true); o != Committed || !harness.FoldPlanMode(b.events) {
		t.Fatalf("set(true) = %s, fold %v", o, harness.FoldPlanMode(b.events))
	}
	if o, _ := b.set(false); o != Committed {
		t.Fatalf("set(false) = %s", o)
	}
	b.openTurn()
	if err := b.boundary(); err != nil {
		t.Fatal(err)
	}
	if n := b.planModes(); n != 2 {
		t.Fatalf("%d plan/mode events, want exactly 2", n)
	}
}

func TestBetweenTurnsReversalOfMidTurnPendingCancels(t *testing.T) {
	b := &bench{t: t}
	b.openTurn()
	if o, _ := b.set(true); o != Queued {
		t.Fatal(o)
	}
	b.closeTurn()
	if o, _ := b.set(false); o != Cancelled {
		t.Fatalf("set(false) = %s, want cancelled", o)
	}
	if b.planModes() != 0 {
		t.Fatal("no plan/mode may be logged")
	}
	expectGet(t, b, false, nil)
}

func TestBetweenTurnsCommitNarratesWhenHeaderToldOtherwise(t *testing.T) {
	b := &bench{t: t}
	b.header()
	d := Set(b.state(), true)
	if d.Outcome != Committed || d.Notice != harness.NoticePlanOn {
		t.Fatalf("decision %+v, want committed with %q", d, harness.NoticePlanOn)
	}
}

func TestFlushIsInertWithNothingPending(t *testing.T) {
	b := &bench{t: t}
	b.openTurn()
	if err := b.boundary(); err != nil || b.planModes() != 0 {
		t.Fatalf("err %v, plan/mode %d", err, b.planModes())
	}
	d := Flush(State{Logged: true})
	if d.Append != nil || d.ClearPending || d.Notice != "" || !d.Active {
		t.Fatalf("Flush with nothing pending = %+v", d)
	}
}

func TestFlushesBeforeTheFollowingStepStart(t *testing.T) {
	b := &bench{t: t}
	b.openTurn()
	b.mustSet(true)
	if err := b.boundary(); err != nil {
		t.Fatal(err)
	}
	expectGet(t, b, true, nil)
	// plan/mode precedes the step/start the boundary admitted.
	if b.events[1].Type != harness.TypePlanMode || b.events[2].Type != harness.TypeStepStart {
		t.Fatalf("order %s, %s", b.events[1].Type, b.events[2].Type)
	}
}

func TestBetweenStepSeam(t *testing.T) {
	b := &bench{t: t}
	if o, _ := b.set(true); o != Committed {
		t.Fatal(o)
	}
	b.openTurn()
	b.mustBoundary()
	if !harness.FoldPlanMode(b.events) || b.planModes() != 1 {
		t.Fatal("the boundary must keep fold T without appending again")
	}
}

// Narration and net-zero at the boundary.
func TestBoundaryNarration(t *testing.T) {
	cases := []struct {
		name      string
		setup     func(b *bench)
		flips     []bool
		wantFold  bool
		wantPMs   int
		wantNotes []string
	}{
		{
			name:     "nets out a flip sequence that returns to the folded mode",
			setup:    func(b *bench) { b.header(); b.openTurn() },
			flips:    []bool{true, false, true, false},
			wantFold: false, wantPMs: 0, wantNotes: nil,
		},
		{
			name:     "narrates nothing before the first request header",
			setup:    func(b *bench) { b.openTurn() },
			flips:    []bool{true},
			wantFold: true, wantPMs: 1, wantNotes: nil,
		},
		{
			name:     "narrates once when the flushed mode differs from the last header",
			setup:    func(b *bench) { b.header(); b.openTurn() },
			flips:    []bool{true},
			wantFold: true, wantPMs: 1, wantNotes: []string{harness.NoticePlanOn},
		},
		{
			name: "narrates a switch back with the default wording",
			setup: func(b *bench) {
				b.add(harness.TypePlanMode, harness.PlanMode{Active: true})
				b.header()
				b.openTurn()
			},
			flips:    []bool{false},
			wantFold: false, wantPMs: 2, wantNotes: []string{harness.NoticeDefault},
		},
		{
			name: "stays silent when the header already reflects the flushed mode",
			setup: func(b *bench) {
				b.add(harness.TypePlanMode, harness.PlanMode{Active: true})
				b.header()
				b.add(harness.TypePlanMode, harness.PlanMode{Active: false})
				b.openTurn()
			},
			flips:    []bool{true},
			wantFold: true, wantPMs: 3, wantNotes: nil,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &bench{t: t}
			c.setup(b)
			for _, x := range c.flips {
				b.mustSet(x)
			}
			if err := b.boundary(); err != nil {
				t.Fatal(err)
			}
			// A second boundary must not narrate again.
			if err := b.boundary(); err != nil {
				t.Fatal(err)
			}
			if harness.FoldPlanMode(b.events) != c.wantFold || b.planModes() != c.wantPMs {
				t.Fatalf("fold %v with %d plan/mode, want %v with %d", harness.FoldPlanMode(b.events), b.planModes(), c.wantFold, c.wantPMs)
			}
			if len(b.notices) != len(c.wantNotes) {
				t.Fatalf("notices %q, want %q", b.notices, c.wantNotes)
			}
			for i := range c.wantNotes {
				if b.notices[i] != c.wantNotes[i] {
					t.Fatalf("notice %q, want %q", b.notices[i], c.wantNotes[i])
				}
			}
			expectGet(t, b, c.wantFold, nil)
		})
	}
}

// An approved exit (Narrate false) is never narrated.
func TestExitFlushNarratesNothing(t *testing.T) {
	b := &bench{t: t}
	b.add(harness.TypePlanMode, harness.PlanMode{Active: true})
	b.header()
	b.openTurn()
	b.pending = &Pending{Active: false, Narrate: false}
	expectGet(t, b, true, ptr(false))
	if err := b.boundary(); err != nil {
		t.Fatal(err)
	}
	if harness.FoldPlanMode(b.events) || len(b.notices) != 0 {
		t.Fatalf("fold %v, notices %q", harness.FoldPlanMode(b.events), b.notices)
	}
}

// A failed append fails the proposal and the intent stays pending.
func TestAppendFailureKeepsIntentPending(t *testing.T) {
	t.Run("between turns", func(t *testing.T) {
		b := &bench{t: t, failAppend: true}
		if _, err := b.set(true); !errors.Is(err, errInjected) {
			t.Fatalf("set error %v, want the append failure", err)
		}
		expectGet(t, b, false, nil) // idle set(): pending untouched (none before)
		b.failAppend = false
		if o, _ := b.set(true); o != Committed || !harness.FoldPlanMode(b.events) {
			t.Fatal("after repair the selection must commit")
		}
	})
	t.Run("at the boundary", func(t *testing.T) {
		b := &bench{t: t, failAppend: true}
		b.header()
		b.openTurn()
		b.mustSet(true)
		if err := b.boundary(); !errors.Is(err, errInjected) {
			t.Fatalf("boundary error %v, want the append failure", err)
		}
		expectGet(t, b, false, ptr(true))
		if len(b.notices) != 0 {
			t.Fatal("a failed proposal records no notice")
		}
		b.failAppend = false
		if err := b.boundary(); err != nil {
			t.Fatal(err)
		}
		expectGet(t, b, true, nil)
		if len(b.notices) != 1 || b.notices[0] != harness.NoticePlanOn {
			t.Fatalf("notices %q", b.notices)
		}
	})
}

// A between-turns commit owes its notice to the first step of the next turn, once.
func TestBetweenTurnsNoticeDeliveredOnceAtNextStep(t *testing.T) {
	b := &bench{t: t}
	b.openTurn()
	b.header()
	b.closeTurn()
	if o, _ := b.set(true); o != Committed {
		t.Fatal(o)
	}
	b.openTurn()
	b.mustBoundary()
	b.mustBoundary()
	if len(b.notices) != 1 || b.notices[0] != harness.NoticePlanOn {
		t.Fatalf("notices %q, want exactly one %q", b.notices, harness.NoticePlanOn)
	}
}

func TestPlanCommandReplies(t *testing.T) {
	replies := []struct {
		off    bool
		o      Outcome
		logged bool
		want   string
	}{
		{false, Committed, false, "Plan mode on. Use /plan off to leave."},
		{false, Queued, false, "Entering plan mode (applies from the next step). Use /plan off to leave."},
		{false, Noop, true, "Entering plan mode (applies from the next step). Use /plan off to leave."},
		{true, Committed, true, "Plan mode off."},
		{true, Queued, true, "Leaving plan mode (applies from the next step)."},
		{true, Cancelled, false, "Plan mode entry cancelled."},
		{true, Noop, false, "Plan mode is already inactive."},
		{true, Noop, true, "Leaving plan mode (applies from the next step)."},
	}
	for _, r := range replies {
		if got := PlanCommandReply(r.off, r.o, r.logged); got != r.want {
			t.Errorf("PlanCommandReply(%v,%s,%v) = %q, want %q", r.off, r.o, r.logged, got, r.want)
		}
	}
}

func TestPlanValidationAndTitle(t *testing.T) {
	for plan, ok := range map[string]bool{"": false, "do things": false, "## X\nbody": false, "  # Fix it\n- a": true, "#\tT": true, "# ": false} {
		if ValidPlan(plan) != ok {
			t.Errorf("ValidPlan(%q) = %v, want %v", plan, !ok, ok)
		}
	}
	if PlanTitle("intro\n## Fix the flake  \n") != "Fix the flake" || PlanTitle("no heading") != "Plan" {
		t.Fatal("PlanTitle")
	}
}
