package sessionlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// check validates one event with harness.Check and names the session in a refusal.
func check(sessionID string, ev *harness.Event) (harness.Facts, *ValidationError) {
	f, err := harness.Check(ev)
	if err == nil {
		return f, nil
	}
	var inv *harness.InvalidEventError
	if !errors.As(err, &inv) {
		return f, &ValidationError{SessionID: sessionID, Seq: ev.Seq, Type: ev.Type, Message: err.Error()}
	}
	return f, &ValidationError{SessionID: sessionID, Seq: inv.Seq, Type: inv.Type, Field: inv.Field, Message: inv.Message}
}

// prepared is a validated batch: the events with data compacted and time filled, and the
// facts the tail fold needs.
type prepared struct {
	events []harness.Event
	facts  []harness.Facts
}

// prepareBatch validates a batch before anything is written: every event valid, seqs
// contiguous. It copies the events, compacts data and fills a zero time with now.
func prepareBatch(sessionID string, events []harness.Event) (prepared, error) {
	if sessionID == "" {
		return prepared{}, errors.New("session id is empty")
	}
	p := prepared{events: make([]harness.Event, len(events)), facts: make([]harness.Facts, len(events))}
	now := nowMillis()
	for i := range events {
		ev := events[i]
		if i > 0 && ev.Seq != events[0].Seq+int64(i) {
			return prepared{}, &ValidationError{SessionID: sessionID, Seq: ev.Seq, Type: ev.Type, Field: fieldSeq,
				Message: fmt.Sprintf("seq %d does not continue the batch (expected %d); seqs must be contiguous", ev.Seq, events[0].Seq+int64(i))}
		}
		f, verr := check(sessionID, &ev)
		if verr != nil {
			return prepared{}, verr
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, ev.Data); err != nil {
			return prepared{}, &ValidationError{SessionID: sessionID, Seq: ev.Seq, Type: ev.Type, Field: fieldData, Message: "data is not valid JSON"}
		}
		ev.Data = buf.Bytes()
		if len(ev.SurfaceOp) > 0 {
			var sb bytes.Buffer
			_ = json.Compact(&sb, ev.SurfaceOp)
			ev.SurfaceOp = sb.Bytes()
		}
		if ev.Time == 0 {
			ev.Time = now
		}
		p.events[i] = ev
		p.facts[i] = f
	}
	return p, nil
}

// checkStored re-validates an event read back from storage; a failure is corruption.
func checkStored(sessionID string, ev *harness.Event) error {
	if _, verr := check(sessionID, ev); verr != nil {
		field := ""
		if verr.Field != "" {
			field = verr.Field + ": "
		}
		return &CorruptError{SessionID: sessionID, Seq: ev.Seq, Reason: field + verr.Message}
	}
	return nil
}
