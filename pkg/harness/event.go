package harness

import (
	"encoding/json"
	"fmt"
)

// Event is one session-log event in the harness envelope. Field order matches the harness's
// Session.append (type, seq, time, data, then the optional fields).
type Event struct {
	Type string `json:"type"`
	// Seq is the event's position: the log's length when it was appended, contiguous from 0.
	Seq int64 `json:"seq"`
	// Time is Unix epoch milliseconds at append.
	Time int64           `json:"time"`
	Data json.RawMessage `json:"data"`
	// Ignorable marks an event a reader may skip when it does not know its type.
	Ignorable bool `json:"ignorable,omitempty"`
	// SourceEventSeqs and SurfaceOp appear only on surface events (user/message,
	// assistant/message, tool/result); kept verbatim.
	SourceEventSeqs []int64         `json:"sourceEventSeqs,omitempty"`
	SurfaceOp       json.RawMessage `json:"surfaceOp,omitempty"`
}

// surfaceAppend is the surfaceOp of an appended surface event.
var surfaceAppend = json.RawMessage(`"append"`)

// isSurface reports whether events of type typ are projected into the model's history, and so
// carry a surfaceOp.
func isSurface(typ string) bool {
	return typ == TypeUserMessage || typ == TypeAssistantMessage || typ == TypeToolResult
}

// NewEvent builds an event of type typ whose data is payload marshalled to JSON (a
// json.RawMessage or []byte payload is used as is). Seq and Time are left 0: number a batch
// with Sequence, and the store fills a zero time at append. Surface events get surfaceOp
// "append", as the harness writes them.
func NewEvent(typ string, payload any) (Event, error) {
	var data []byte
	switch p := payload.(type) {
	case json.RawMessage:
		data = p
	case []byte:
		data = p
	default:
		b, err := json.Marshal(payload)
		if err != nil {
			return Event{}, fmt.Errorf("marshal %s data: %w", typ, err)
		}
		data = b
	}
	ev := Event{Type: typ, Data: json.RawMessage(data)}
	if isSurface(typ) {
		ev.SurfaceOp = surfaceAppend
	}
	return ev, nil
}

// MustEvent is NewEvent for payloads that cannot fail to marshal (the payload types of this
// package); it panics on a marshalling error, so use it only with such payloads.
func MustEvent(typ string, payload any) Event {
	ev, err := NewEvent(typ, payload)
	if err != nil {
		panic(err)
	}
	return ev
}

// Sequence numbers events contiguously from next (normally Tail.NextSeq) in place and returns
// them, ready for an append.
func Sequence(next int64, events ...Event) []Event {
	for i := range events {
		events[i].Seq = next + int64(i)
	}
	return events
}

// Decode unmarshals the event's data into v (one of the payload types of this package).
func (e Event) Decode(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("decode %s data at seq %d: %w", e.Type, e.Seq, err)
	}
	return nil
}
