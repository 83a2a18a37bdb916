package sessionlog

import (
	"context"
	"fmt"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// ForkBoundaryError is returned by Fork when the prefix would end inside an open turn.
type ForkBoundaryError struct {
	SessionID string
	Boundary  int64
	Turn      int64
}

func (e *ForkBoundaryError) Error() string {
	// The harness's own wording for the same refusal.
	return fmt.Sprintf("fork boundary %d in session %q ends inside open turn %d", e.Boundary, e.SessionID, e.Turn)
}

// seeder is the backend half of Fork: create a session with a header and initial events,
// checking and recording its ownership in the same transaction.
type seeder interface {
	seed(ctx context.Context, info SessionInfo, events []harness.Event, so seedOwnership) (harness.Tail, error)
	ReadFrom(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]harness.Event, error)
	Tail(ctx context.Context, sessionID string) (harness.Tail, error)
	Info(ctx context.Context, sessionID string) (SessionInfo, error)
}

// fork implements Store.Fork for both backends on top of ReadFrom and seed. The source is
// append-only, so the prefix read is stable while the child is written; who may copy it is
// decided in the seed's transaction.
func fork(ctx context.Context, s seeder, srcID, dstID string, throughSeq int64, owner Owner) (harness.Tail, error) {
	if srcID == "" || dstID == "" {
		return harness.Tail{}, fmt.Errorf("fork %q -> %q: session ids must be non-empty", srcID, dstID)
	}
	if owner.Namespace == "" || owner.Name == "" {
		return harness.Tail{}, fmt.Errorf("fork %q -> %q: the AgentSession the fork is for (namespace and name) is required", srcID, dstID)
	}
	if srcID == dstID {
		return harness.Tail{}, fmt.Errorf("fork %q: the child id must differ from the source id", srcID)
	}
	if _, err := s.Info(ctx, srcID); err != nil {
		return harness.Tail{}, fmt.Errorf("fork %q: %w", srcID, err)
	}
	srcTail, err := s.Tail(ctx, srcID)
	if err != nil {
		return harness.Tail{}, fmt.Errorf("fork %q: %w", srcID, err)
	}
	if throughSeq >= srcTail.NextSeq {
		return harness.Tail{}, fmt.Errorf("fork boundary %d in session %q is past its last event (next seq %d)", throughSeq, srcID, srcTail.NextSeq)
	}
	var events []harness.Event
	if throughSeq >= 0 {
		events, err = s.ReadFrom(ctx, srcID, 0, int(throughSeq+1))
	} else {
		events, err = s.ReadFrom(ctx, srcID, 0, 0)
	}
	if err != nil {
		return harness.Tail{}, fmt.Errorf("fork %q: %w", srcID, err)
	}
	// Fold the prefix; the default boundary is the last turn/end (the subagent provider's
	// "balanced completed-turn prefix"), and an explicit one must lie outside an open turn.
	t := harness.EmptyTail()
	lastTurnEnd := int64(-1)
	for i := range events {
		ev := &events[i]
		f, verr := check(srcID, ev)
		if verr != nil {
			return harness.Tail{}, &CorruptError{SessionID: srcID, Seq: ev.Seq, Reason: verr.Message}
		}
		t.Apply(ev, f)
		if ev.Type == harness.TypeTurnEnd {
			lastTurnEnd = ev.Seq
		}
	}
	if throughSeq < 0 {
		events = events[:lastTurnEnd+1]
	} else if t.TurnOpen {
		return harness.Tail{}, &ForkBoundaryError{SessionID: srcID, Boundary: throughSeq, Turn: t.Turn}
	}
	info := SessionInfo{ID: dstID, CreatedAt: nowMillis(), ParentSession: srcID, SeedLength: int64(len(events))}
	return s.seed(ctx, info, events, seedOwnership{owner: owner, parent: srcID})
}
