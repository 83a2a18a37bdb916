// Package invariant checks a session's log (and what the manager said about it) against the
// plan-mode invariants of docs/protocol.md: a plan/mode never
// repeats the committed state, never lands inside a step, at most one lands at a step boundary,
// every acknowledged boundary matches the log, the final selection committed, notices follow
// the narration rule, and seqs have no gaps. Tests and the fault runs in test/reliability use
// it; cmd/plancheck runs it against a live store and AgentSession.
package invariant

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// Kind names one invariant.
type Kind string

// The invariants. Each Violation carries one of them.
const (
	// SeqGap: seqs are not contiguous from 0 (a missing or repeated event).
	SeqGap Kind = "SeqGap"
	// InvalidPlanMode: a plan/mode whose data is not exactly {active: bool}.
	InvalidPlanMode Kind = "InvalidPlanMode"
	// Duplicate: a plan/mode that repeats the committed state (the fold before it).
	Duplicate Kind = "DuplicatePlanMode"
	// InsideStep: a plan/mode between a step/start and its step/end.
	InsideStep Kind = "PlanModeInsideStep"
	// SameBoundary: two plan/modes at one step boundary of an open turn (no step/start between).
	SameBoundary Kind = "TwoPlanModesAtOneBoundary"
	// AckNotInLog: a boundary acknowledged with a state or position the log does not hold.
	AckNotInLog Kind = "AckStateNotInLog"
	// NotCommitted: the final selection never committed (no turn open, nothing pending).
	NotCommitted Kind = "SelectionNeverCommitted"
	// NoticeText: a plan-mode notice whose text does not match the switch it narrates.
	NoticeText Kind = "NoticeTextMismatch"
	// NoticeMissing: a user-selected plan/mode whose first admitted step lacks the notice it
	// owes (the last request/header described the other state).
	NoticeMissing Kind = "NoticeMissing"
	// NoticeNotOwed: a plan-mode notice where none was owed.
	NoticeNotOwed Kind = "NoticeNotOwed"
)

// Violation is one broken invariant.
type Violation struct {
	Kind Kind `json:"kind"`
	// Seq is the event the violation is about (for an ack: the boundary's seq; -1: none).
	Seq int64 `json:"seq"`
	// Related are other seqs involved (the earlier plan/mode, the step/start, ...).
	Related []int64 `json:"related,omitempty"`
	Message string  `json:"message"`
}

func (v Violation) String() string {
	s := fmt.Sprintf("seq %d: %s: %s", v.Seq, v.Kind, v.Message)
	if len(v.Related) > 0 {
		s += fmt.Sprintf(" (related seqs %v)", v.Related)
	}
	return s
}

// Source says who selected a plan/mode: the user (narrated) or an approved exit (never).
type Source string

// Sources of a plan/mode.
const (
	SourceUser Source = "User"
	SourceExit Source = "Exit"
)

// Ack is one boundary answer the manager published (status.planMode.lastBoundary).
type Ack struct {
	Turn    int64  `json:"turn"`
	Step    int64  `json:"step"`
	Seq     int64  `json:"seq"`
	Result  string `json:"result"`
	Active  bool   `json:"active"`
	NextSeq int64  `json:"nextSeq"`
	Notice  string `json:"notice,omitempty"`
}

// AckFrom converts a status ack; nil gives nil.
func AckFrom(a *agentsv1alpha1.BoundaryAck) *Ack {
	if a == nil {
		return nil
	}
	return &Ack{Turn: a.Turn, Step: a.Step, Seq: a.Seq, Result: string(a.Result), Active: a.Active, NextSeq: a.NextSeq, Notice: a.Notice}
}

// Final is the AgentSession's state when the check runs.
type Final struct {
	// Selection is spec.planMode.active (nil: no selection, nothing to check).
	Selection *bool `json:"selection,omitempty"`
	// TakenOn is status.planMode.selection: the selection the manager has taken on.
	TakenOn *bool `json:"takenOn,omitempty"`
	// Pending is status.planMode.pending.
	Pending bool `json:"pending"`
}

// FinalFrom reads the final state from an AgentSession.
func FinalFrom(s *agentsv1alpha1.AgentSession) *Final {
	return &Final{Selection: s.Spec.PlanMode.Active, TakenOn: s.Status.PlanMode.Selection, Pending: s.Status.PlanMode.Pending}
}

// Input is what Check looks at.
type Input struct {
	// Events is the session's log from seq 0.
	Events []harness.Event
	// Acks are the boundary answers observed (a recorded history of lastBoundary), optional.
	Acks []Ack
	// Final is the AgentSession's state at the end, optional.
	Final *Final
	// Sources overrides, per plan/mode seq, who selected it. Without an entry a plan/mode
	// {false} that follows an approved exit_plan_mode result (with no plan/mode in between) is
	// taken as the approved exit, every other one as the user's.
	Sources map[int64]Source
}

// CheckStore reads the whole log of sessionID from store and checks it with acks and final.
func CheckStore(ctx context.Context, store sessionlog.Store, sessionID string, acks []Ack, final *Final) ([]Violation, error) {
	evs, err := store.ReadFrom(ctx, sessionID, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("read the log of session %q: %w", sessionID, err)
	}
	return Check(Input{Events: evs, Acks: acks, Final: final}), nil
}

// pmInfo is a plan/mode as the log walk saw it.
type pmInfo struct {
	seq    int64
	active bool
	source Source
	notice string // the notice it owes its first admitted step ("" none)
}

// stepInfo collects one step's notices while the walk is inside it.
type stepInfo struct {
	turn, step int64
	startSeq   int64
	owed       *pmInfo // the last plan/mode since the previous step/start, if any
	notices    []notice
}

type notice struct {
	seq           int64
	text, summary string
	badShape      bool
}

// walker is the state of one pass over the log.
type walker struct {
	out []Violation

	// log is the fold of the events walked so far (committed state, last header, open
	// turn and step): the same fold a store keeps.
	log           harness.Tail
	boundaryPM    int64   // seq of a plan/mode at the current open-turn boundary, -1 none
	sinceStep     *pmInfo // the last plan/mode since the last step/start
	approvedExit  bool    // an approved exit_plan_mode result since the last plan/mode
	step          *stepInfo
	lastPlanMode  *pmInfo
	sources       map[int64]Source
	activeAfter   map[int64]bool // fold after each seq, for the ack checks
	seqs          []int64        // seqs in log order
	eventAt       map[int64]*harness.Event
	planModeCount int
	toolNames     map[string]string // tool name by call id, from tool/call
}

func (w *walker) add(kind Kind, seq int64, related []int64, format string, args ...any) {
	w.out = append(w.out, Violation{Kind: kind, Seq: seq, Related: related, Message: fmt.Sprintf(format, args...)})
}

// Check runs every invariant over in and returns the violations in log order (acks and the
// final state after the log's own).
func Check(in Input) []Violation {
	w := &walker{log: harness.EmptyTail(), boundaryPM: -1, sources: in.Sources, activeAfter: map[int64]bool{}, eventAt: map[int64]*harness.Event{},
		toolNames: map[string]string{}}
	want := int64(0)
	for i := range in.Events {
		ev := &in.Events[i]
		if ev.Seq != want {
			if ev.Seq > want {
				w.add(SeqGap, ev.Seq, nil, "seq %d follows seq %d: events %d..%d are missing", ev.Seq, want-1, want, ev.Seq-1)
			} else {
				w.add(SeqGap, ev.Seq, nil, "seq %d repeats or goes backwards (expected %d)", ev.Seq, want)
			}
		}
		want = ev.Seq + 1
		w.event(ev)
		w.activeAfter[ev.Seq] = w.log.Active
		w.seqs = append(w.seqs, ev.Seq)
		w.eventAt[ev.Seq] = ev
	}
	w.closeStep()
	for _, a := range in.Acks {
		w.checkAck(a)
	}
	if in.Final != nil {
		w.checkFinal(in.Final)
	}
	return w.out
}

func (w *walker) event(ev *harness.Event) {
	f, err := harness.Check(ev)
	if ev.Type == harness.TypePlanMode {
		w.planMode(ev, f, err)
		return
	}
	// An event the store would refuse changes no state; it cannot come from a store.
	if err == nil {
		defer w.log.Apply(ev, f)
	}
	switch ev.Type {
	case harness.TypeTurnStart, harness.TypeTurnEnd:
		w.closeStep()
		w.boundaryPM = -1
	case harness.TypeStepStart:
		w.closeStep()
		var d harness.StepStart
		_ = ev.Decode(&d)
		w.step = &stepInfo{turn: d.Turn, step: d.Step, startSeq: ev.Seq, owed: w.sinceStep}
		w.sinceStep = nil
		w.boundaryPM = -1
	case harness.TypeStepEnd:
		w.closeStep()
	case harness.TypeUserMessage:
		if n, ok := planModeNotice(ev); ok {
			if w.step == nil {
				w.add(NoticeNotOwed, ev.Seq, nil, "plan-mode notice %q outside any step; notices are recorded only in an admitted step", n.text)
			} else {
				w.step.notices = append(w.step.notices, n)
			}
		}
	case harness.TypeToolCall:
		var c harness.ToolCall
		if ev.Decode(&c) == nil {
			w.toolNames[c.CallID] = c.Name
		}
	case harness.TypeToolResult:
		if w.approvedExitResult(ev) {
			w.approvedExit = true
		}
	}
}

// planMode checks a plan/mode against the state before it (f and err are Check's answer for
// it), then folds it in.
func (w *walker) planMode(ev *harness.Event, f harness.Facts, err error) {
	if err != nil {
		w.add(InvalidPlanMode, ev.Seq, nil, "%v", err)
		return
	}
	var d harness.PlanMode
	_ = ev.Decode(&d)
	active := d.Active
	defer w.log.Apply(ev, f)
	w.planModeCount++
	duplicate := active == w.log.Active
	if duplicate {
		rel := []int64(nil)
		if w.lastPlanMode != nil {
			rel = []int64{w.lastPlanMode.seq}
		}
		w.add(Duplicate, ev.Seq, rel, "plan/mode {active: %v} repeats the committed state (the log already folds to %v)", active, w.log.Active)
	}
	if w.log.StepOpen {
		rel := []int64(nil)
		if w.step != nil {
			rel = []int64{w.step.startSeq}
		}
		w.add(InsideStep, ev.Seq, rel,
			"plan/mode {active: %v} appended inside step %s (after its step/start, before its step/end); plan/mode lands only at a step boundary or between turns", active, w.stepName())
	} else if w.log.TurnOpen {
		if w.boundaryPM >= 0 {
			w.add(SameBoundary, ev.Seq, []int64{w.boundaryPM},
				"second plan/mode at one step boundary: seq %d already committed a plan/mode at this boundary (no step/start between them)", w.boundaryPM)
		}
		w.boundaryPM = ev.Seq
	}
	src, ok := w.sources[ev.Seq]
	if !ok {
		src = SourceUser
		if !active && w.approvedExit {
			src = SourceExit
		}
	}
	if duplicate {
		// No switch: it narrates nothing and leaves whatever notice is owed as it was.
		w.approvedExit = false
		return
	}
	pm := &pmInfo{seq: ev.Seq, active: active, source: src}
	if src == SourceUser {
		pm.notice = planmode.Narration(w.log.LastShown, active)
	}
	w.approvedExit = false
	w.lastPlanMode = pm
	w.sinceStep = pm
}

func (w *walker) stepName() string {
	if w.step == nil {
		return "?"
	}
	return fmt.Sprintf("(%d,%d)", w.step.turn, w.step.step)
}

// closeStep checks the narration rule for the step the walk is leaving: the notice owed by the
// last plan/mode before its step/start, nothing else.
func (w *walker) closeStep() {
	st := w.step
	if st == nil {
		return
	}
	w.step = nil
	owed := ""
	if st.owed != nil {
		owed = st.owed.notice
	}
	matched := false
	for _, n := range st.notices {
		switch {
		case n.badShape || n.text != n.summary:
			w.add(NoticeText, n.seq, []int64{st.startSeq}, "plan-mode notice in step (%d,%d) is malformed: content text %q, summary %q", st.turn, st.step, n.text, n.summary)
		case owed == "" || matched:
			why := "no plan/mode before this step owes one"
			switch {
			case matched:
				why = "the owed notice was already recorded in this step"
			case st.owed != nil && st.owed.source == SourceExit:
				why = fmt.Sprintf("the plan/mode at seq %d is an approved exit, which is never narrated", st.owed.seq)
			case st.owed != nil:
				why = fmt.Sprintf("the last request/header before the plan/mode at seq %d already described plan mode %s", st.owed.seq, planmode.OnOff(st.owed.active))
			}
			w.add(NoticeNotOwed, n.seq, relatedOf(st), "plan-mode notice %q in step (%d,%d) where none was owed: %s", n.text, st.turn, st.step, why)
		case n.text != owed:
			w.add(NoticeText, n.seq, relatedOf(st), "plan-mode notice %q in step (%d,%d) does not match the switch at seq %d (plan mode %s): expected %q",
				n.text, st.turn, st.step, st.owed.seq, planmode.OnOff(st.owed.active), owed)
			matched = true
		default:
			matched = true
		}
	}
	if owed != "" && !matched {
		w.add(NoticeMissing, st.owed.seq, []int64{st.startSeq},
			"user selection plan/mode {active: %v} at seq %d owes the notice %q to its first admitted step (%d,%d) at seq %d, which lacks it",
			st.owed.active, st.owed.seq, owed, st.turn, st.step, st.startSeq)
	}
}

func relatedOf(st *stepInfo) []int64 {
	if st.owed != nil {
		return []int64{st.startSeq, st.owed.seq}
	}
	return []int64{st.startSeq}
}

// checkAck verifies that the log holds what an ack says: the committed state as of its
// nextSeq, and (for an admitted boundary) a plan/mode at seq exactly when nextSeq is seq+1.
func (w *walker) checkAck(a Ack) {
	where := fmt.Sprintf("ack of boundary (%d,%d) at seq %d (%s)", a.Turn, a.Step, a.Seq, a.Result)
	end := int64(-1)
	if n := len(w.seqs); n > 0 {
		end = w.seqs[n-1] + 1
	}
	if end < 0 {
		end = 0
	}
	if a.NextSeq > end {
		w.add(AckNotInLog, a.Seq, nil, "%s says nextSeq %d, but the log ends at %d", where, a.NextSeq, end)
		return
	}
	if got := w.foldBefore(a.NextSeq); got != a.Active {
		w.add(AckNotInLog, a.Seq, nil, "%s says active %v as of nextSeq %d, but the log folds to %v there", where, a.Active, a.NextSeq, got)
	}
	if a.Notice != "" && a.Notice != harness.NoticeText(a.Active) {
		w.add(AckNotInLog, a.Seq, nil, "%s carries notice %q, which does not narrate plan mode %s", where, a.Notice, planmode.OnOff(a.Active))
	}
	if a.Result != string(agentsv1alpha1.BoundaryAdmitted) {
		return
	}
	ev := w.eventAt[a.Seq]
	switch a.NextSeq {
	case a.Seq + 1:
		if ev == nil || ev.Type != harness.TypePlanMode {
			typ := "no event"
			if ev != nil {
				typ = ev.Type
			}
			w.add(AckNotInLog, a.Seq, nil, "%s says a plan/mode was appended at seq %d (nextSeq %d), but the log has %s there", where, a.Seq, a.NextSeq, typ)
		}
	case a.Seq:
		// Nothing appended for this boundary. The log may still hold a plan/mode at seq when
		// another writer got there after the answer; the agent's step/start then conflicts
		// and it asks again, so only the state before nextSeq (checked above) must hold.
	default:
		w.add(AckNotInLog, a.Seq, nil, "%s admitted the step with nextSeq %d; an admitted boundary's nextSeq is its seq or seq+1", where, a.NextSeq)
	}
}

// foldBefore is the committed state of the events with seq < n.
func (w *walker) foldBefore(n int64) bool {
	i := sort.Search(len(w.seqs), func(i int) bool { return w.seqs[i] >= n })
	if i == 0 {
		return false
	}
	return w.activeAfter[w.seqs[i-1]]
}

// checkFinal: with no turn open and nothing pending, the final selection must be the
// committed state, unless an approved exit (after the selection was taken on) left plan mode.
func (w *walker) checkFinal(f *Final) {
	if f.Selection == nil || w.log.TurnOpen || f.Pending {
		return
	}
	x := *f.Selection
	last := int64(-1)
	if w.lastPlanMode != nil {
		last = w.lastPlanMode.seq
	}
	if f.TakenOn == nil || *f.TakenOn != x {
		w.add(NotCommitted, last, nil, "spec.planMode.active is %v but the manager never took it on (status.planMode.selection %s)", x, ptrText(f.TakenOn))
		return
	}
	if w.log.Active == x {
		return
	}
	if w.lastPlanMode != nil && w.lastPlanMode.source == SourceExit && x {
		return // an approved exit left plan mode after the selection; the spec keeps the old value
	}
	w.add(NotCommitted, last, nil, "spec.planMode.active is %v and nothing is pending with no turn open, but the log folds to %v", x, w.log.Active)
}

// planModeNotice recognises a plugin-sourced plan-mode notice user/message.
func planModeNotice(ev *harness.Event) (notice, bool) {
	var m struct {
		Content json.RawMessage `json:"content"`
		Source  struct {
			Kind    string  `json:"kind"`
			Plugin  string  `json:"plugin"`
			Form    string  `json:"form"`
			Summary *string `json:"summary"`
		} `json:"source"`
	}
	if json.Unmarshal(ev.Data, &m) != nil || m.Source.Kind != harness.SourceKindPlugin || m.Source.Plugin != harness.NoticeSourcePlugin {
		return notice{}, false
	}
	n := notice{seq: ev.Seq}
	if m.Source.Form != harness.NoticeSourceForm || m.Source.Summary == nil {
		n.badShape = true
	} else {
		n.summary = *m.Source.Summary
	}
	n.text = textOf(m.Content)
	return n, true
}

// textOf joins the text parts of a content array (or a plain string content).
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct{ Type, Text string }
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// approvedExitResult recognises the tool/result of an approved exit_plan_mode: a result that
// is not an error, starts with the approval text and answers an exit_plan_mode call (named by
// its tool/call; results of earlier operator releases name the tool themselves).
func (w *walker) approvedExitResult(ev *harness.Event) bool {
	o, ok := harness.ReadToolResult(ev.Data)
	if !ok || o.IsError {
		return false
	}
	name := o.ToolName
	if name == "" {
		name = w.toolNames[o.CallID]
	}
	return name == harness.ExitToolName && strings.HasPrefix(o.Text, "Plan approved")
}

func ptrText(b *bool) string {
	if b == nil {
		return "unset"
	}
	return fmt.Sprint(*b)
}
