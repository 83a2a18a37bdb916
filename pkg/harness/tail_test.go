package harness

import (
	"encoding/json"
	"testing"
)

func pm(seq int64, active bool) Event { return PlanModeEvent(seq, active) }

// logb builds an in-memory log; add appends at the next seq.
type logb struct {
	t      *testing.T
	events []Event
}

func (b *logb) add(typ string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		b.t.Fatal(err)
	}
	b.events = append(b.events, Event{Type: typ, Seq: int64(len(b.events)), Data: raw})
}

func fmtPtr(p *bool) any {
	if p == nil {
		return "undefined"
	}
	return *p
}

func TestFoldPlanMode(t *testing.T) {
	if FoldPlanMode(nil) {
		t.Fatal("empty log must fold to inactive")
	}
	log := []Event{pm(0, true), pm(1, false), pm(2, true)}
	if !FoldPlanMode(log) {
		t.Fatal("T,F,T must fold to T")
	}
	two := []Event{pm(0, true), pm(1, false)}
	if !FoldPlanMode(two[:1]) || FoldPlanMode(two[:0]) {
		t.Fatal("[T,F] end=1 must be T and end=0 F")
	}
}

func TestPlanModeAtLastHeaderAndOpenTurn(t *testing.T) {
	b := &logb{t: t}
	if PlanModeAtLastHeader(b.events) != nil || HasOpenTurn(b.events) {
		t.Fatal("empty log: no header, no open turn")
	}
	b.add(TypePlanMode, PlanMode{Active: true}) // a selection committed between turns
	b.add(TypeTurnStart, map[string]int{"turn": 1})
	b.add(TypeRequestHeader, map[string]any{"header": map[string]any{}, "reason": "initial"})
	b.add(TypePlanMode, PlanMode{Active: false})
	told := PlanModeAtLastHeader(b.events)
	if told == nil || !*told {
		t.Fatalf("told = %v, want true (the plan/mode after the header does not count)", fmtPtr(told))
	}
	if !HasOpenTurn(b.events) {
		t.Fatal("turn must be open")
	}
	b.add(TypeTurnEnd, map[string]any{"turn": 1, "reason": map[string]string{"kind": "completed"}})
	if HasOpenTurn(b.events) {
		t.Fatal("turn must be closed")
	}
	// The strict fold a store is checked against agrees with the positional folds above.
	tail, err := FoldTail(b.events)
	if err != nil {
		t.Fatal(err)
	}
	if tail.NextSeq != int64(len(b.events)) || tail.Active || tail.LastPlanModeSeq != 3 || tail.LastShown == nil || !*tail.LastShown || tail.TurnOpen || tail.Turn != 1 {
		t.Fatalf("FoldTail = %+v", tail)
	}
}

// FoldTail refuses what a stored log cannot hold; Replay, like the harness's in-memory folds,
// skips an invalid event.
func TestFoldTailIsStrictReplayIsNot(t *testing.T) {
	bad := Event{Type: TypePlanMode, Seq: 1, Data: json.RawMessage(`{"active":42}`)}
	if _, err := FoldTail([]Event{pm(0, true), bad}); err == nil {
		t.Fatal("FoldTail accepted an invalid plan/mode")
	}
	if _, err := FoldTail([]Event{pm(1, true)}); err == nil {
		t.Fatal("FoldTail accepted a log that does not start at seq 0")
	}
	if got := Replay([]Event{pm(0, true), bad}); !got.Active || got.LastPlanModeSeq != 0 {
		t.Fatalf("Replay = %+v, want the invalid plan/mode skipped", got)
	}
}
