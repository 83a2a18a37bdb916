package sessionlog

import (
	"context"
	"fmt"
)

// EmptyTail is the tail of a session with no events.
func EmptyTail() Tail {
	return Tail{LastPlanModeSeq: -1, LastStepStartSeq: -1}
}

// apply folds one validated event into the tail. Both backends maintain the stored tail row
// with exactly this function inside the append transaction, and FoldTail uses it over a whole
// log, so the incremental and the full fold cannot disagree.
func (t *Tail) apply(ev *Event, f facts) {
	t.NextSeq = ev.Seq + 1
	switch ev.Type {
	case TypePlanMode:
		t.Active = f.active
		t.LastPlanModeSeq = ev.Seq
	case TypeRequestHeader:
		// The plan state "described" to the model is positional: the fold of the plan/mode
		// events that precede the last header (reference spec §4.7).
		told := t.Active
		t.Told = &told
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

// FoldTail computes the tail of a whole log from its events (seq 0 onward). It is the
// reference the incrementally maintained tail is tested against; invalid events are reported.
func FoldTail(sessionID string, events []Event) (Tail, error) {
	t := EmptyTail()
	for i := range events {
		ev := events[i]
		if ev.Seq != int64(i) {
			return Tail{}, fmt.Errorf("session %q: event %d has seq %d; seqs are contiguous from 0", sessionID, i, ev.Seq)
		}
		f, verr := checkEvent(sessionID, &ev)
		if verr != nil {
			return Tail{}, verr
		}
		t.apply(&ev, f)
	}
	return t, nil
}

// ForkBoundaryError is returned by Fork when the prefix would end inside an open turn.
type ForkBoundaryError struct {
	SessionID string
	Boundary  int64
	Turn      int64
}

func (e *ForkBoundaryError) Error() string {
	// The harness's own wording (docs/subsystems/session.md, "Live-session fork API").
	return fmt.Sprintf("fork boundary %d in session %q ends inside open turn %d", e.Boundary, e.SessionID, e.Turn)
}

// seeder is the backend half of Fork: create a session with a header and initial events.
type seeder interface {
	Seed(ctx context.Context, info SessionInfo, events []Event) (Tail, error)
	ReadFrom(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]Event, error)
	Tail(ctx context.Context, sessionID string) (Tail, error)
	Info(ctx context.Context, sessionID string) (SessionInfo, error)
}

// fork implements Store.Fork for both backends on top of ReadFrom and Seed. The source is
// append-only, so the prefix read is stable while the child is written.
func fork(ctx context.Context, s seeder, srcID, dstID string, throughSeq int64) (Tail, error) {
	if srcID == "" || dstID == "" {
		return Tail{}, fmt.Errorf("fork %q -> %q: session ids must be non-empty", srcID, dstID)
	}
	if srcID == dstID {
		return Tail{}, fmt.Errorf("fork %q: the child id must differ from the source id", srcID)
	}
	if _, err := s.Info(ctx, srcID); err != nil {
		return Tail{}, fmt.Errorf("fork %q: %w", srcID, err)
	}
	srcTail, err := s.Tail(ctx, srcID)
	if err != nil {
		return Tail{}, fmt.Errorf("fork %q: %w", srcID, err)
	}
	if throughSeq >= srcTail.NextSeq {
		return Tail{}, fmt.Errorf("fork boundary %d in session %q is past its last event (next seq %d)", throughSeq, srcID, srcTail.NextSeq)
	}
	var events []Event
	if throughSeq >= 0 {
		events, err = s.ReadFrom(ctx, srcID, 0, int(throughSeq+1))
	} else {
		events, err = s.ReadFrom(ctx, srcID, 0, 0)
	}
	if err != nil {
		return Tail{}, fmt.Errorf("fork %q: %w", srcID, err)
	}
	// Fold the prefix; the default boundary is the last turn/end (the subagent provider's
	// "balanced completed-turn prefix"), and an explicit one must lie outside an open turn.
	t := EmptyTail()
	lastTurnEnd := int64(-1)
	for i := range events {
		ev := &events[i]
		f, verr := checkEvent(srcID, ev)
		if verr != nil {
			return Tail{}, &CorruptError{SessionID: srcID, Seq: ev.Seq, Reason: verr.Message}
		}
		t.apply(ev, f)
		if ev.Type == TypeTurnEnd {
			lastTurnEnd = ev.Seq
		}
	}
	if throughSeq < 0 {
		events = events[:lastTurnEnd+1]
	} else if t.TurnOpen {
		return Tail{}, &ForkBoundaryError{SessionID: srcID, Boundary: throughSeq, Turn: t.Turn}
	}
	info := SessionInfo{ID: dstID, CreatedAt: nowMillis(), ParentSession: srcID, SeedLength: int64(len(events))}
	return s.Seed(ctx, info, events)
}
