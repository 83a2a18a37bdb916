package harness

import "fmt"

// Tail is the log state plan mode needs: the fold of a log's events. A store maintains it
// incrementally on every append (Apply), so reading it costs the same for a log of 10 events
// and of 1,000,000; FoldTail and Replay compute it from the events themselves.
type Tail struct {
	// NextSeq is the seq the next appended event must carry (the log length).
	NextSeq int64
	// Active is the committed plan state: the last plan/mode, false when there is none.
	Active bool
	// LastPlanModeSeq is the seq of the last plan/mode, -1 when there is none.
	LastPlanModeSeq int64
	// LastShown is the plan state in force at the last request/header; nil when there is none.
	LastShown *bool
	// TurnOpen is true when the last turn/start has no turn/end after it.
	TurnOpen bool
	// Turn is the number of the last turn/start (0 when none).
	Turn int64
	// LastStepStartSeq is the seq of the last step/start, -1 when there is none.
	LastStepStartSeq int64
	// Step is the step number of the last step/start in the open turn (0 when none).
	Step int64
	// StepOpen is true when the last step/start has no step/end after it.
	StepOpen bool
}

// EmptyTail is the tail of a session with no events.
func EmptyTail() Tail {
	return Tail{LastPlanModeSeq: -1, LastStepStartSeq: -1}
}

// Apply folds one event into the tail; f is what Check returned for that same event. It is
// the one fold: stores run it inside the append transaction, and FoldTail and Replay run it
// over a whole log, so the incremental and the full fold cannot disagree.
func (t *Tail) Apply(ev *Event, f Facts) {
	t.NextSeq = ev.Seq + 1
	switch ev.Type {
	case TypePlanMode:
		t.Active = f.active
		t.LastPlanModeSeq = ev.Seq
	case TypeRequestHeader:
		// A header records no plan field: the state it described to the model is the fold
		// of the plan/mode events before it.
		told := t.Active
		t.LastShown = &told
	case TypeTurnStart:
		t.Turn = f.turn
		t.TurnOpen = true
		t.Step = 0
		t.StepOpen = false
	case TypeTurnEnd:
		t.TurnOpen = false
		t.Step = 0
		t.StepOpen = false
	case TypeStepStart:
		t.Step = f.step
		t.StepOpen = true
		t.LastStepStartSeq = ev.Seq
	case TypeStepEnd:
		t.StepOpen = false
	}
}

// FoldTail computes the tail of a whole log from its events (seq 0 onward, contiguous). It is
// the reference a store's incrementally maintained tail is tested against; the first invalid
// event or seq out of place is reported.
func FoldTail(events []Event) (Tail, error) {
	t := EmptyTail()
	for i := range events {
		ev := &events[i]
		if ev.Seq != int64(i) {
			return Tail{}, fmt.Errorf("event %d has seq %d; seqs are contiguous from 0", i, ev.Seq)
		}
		f, err := Check(ev)
		if err != nil {
			return Tail{}, err
		}
		t.Apply(ev, f)
	}
	return t, nil
}

// Replay folds events in slice order the way the harness's own folds read a log in memory:
// an event that is not valid is skipped (as its foldPlanMode skips a malformed plan/mode;
// a store never holds one), and seqs are not checked.
func Replay(events []Event) Tail {
	t := EmptyTail()
	for i := range events {
		if f, err := Check(&events[i]); err == nil {
			t.Apply(&events[i], f)
		}
	}
	return t
}

// FoldPlanMode is the harness's foldPlanMode(events): the last plan/mode wins, a log with
// none folds to inactive. Fold a prefix (events[:end]) for the state at a position.
func FoldPlanMode(events []Event) bool { return Replay(events).Active }

// PlanModeAtLastHeader is the harness's planModeAtLastHeader(events): nil when the log has no
// request/header, else the plan state folded through the last one.
func PlanModeAtLastHeader(events []Event) *bool { return Replay(events).LastShown }

// HasOpenTurn is the harness's hasOpenTurn(events): the last turn/start has no later turn/end.
func HasOpenTurn(events []Event) bool { return Replay(events).TurnOpen }
