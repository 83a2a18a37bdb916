package sessionlog

import (
	"encoding/json"
	"fmt"
	"time"
)

// Event types that plan mode reads or writes (reference spec §2.2). Every other type is stored
// verbatim.
const (
	TypeTurnStart      = "turn/start"
	TypeTurnEnd        = "turn/end"
	TypeStepStart      = "step/start"
	TypeStepEnd        = "step/end"
	TypeUserMessage    = "user/message"
	TypeRequestHeader  = "request/header"
	TypePlanMode       = "plan/mode"
	TypeCommandRun     = "command/run"
	TypeCommandDone    = "command/done"
	TypeInboxSpliced   = "agent/inbox/spliced"
	TypeSessionEndSeed = "session/end-seed"
)

// TurnStart is the data of turn/start: it opens turn Turn.
type TurnStart struct {
	Turn int64 `json:"turn"`
}

// TurnEnd is the data of turn/end. Reason is the harness's TurnEndReason, an object with a
// string "kind" ({"kind":"completed"}, {"kind":"aborted","reason":{...}}, ...), kept verbatim.
type TurnEnd struct {
	Turn   int64           `json:"turn"`
	Reason json.RawMessage `json:"reason"`
}

// StepStart is the data of step/start; Step restarts at 1 in each turn.
type StepStart struct {
	Turn int64 `json:"turn"`
	Step int64 `json:"step"`
}

// StepEnd is the data of step/end.
type StepEnd struct {
	Turn int64 `json:"turn"`
	Step int64 `json:"step"`
}

// PlanMode is the data of plan/mode: exactly {active: bool}.
type PlanMode struct {
	Active bool `json:"active"`
}

// Request header reasons.
const (
	HeaderReasonInitial = "initial"
	HeaderReasonResume  = "resume"
	HeaderReasonChange  = "change"
)

// RequestHeader is the data of request/header. Header is the harness's EpochHeader
// ({config, adapterDefaults?, system?, tools?}), kept verbatim; it has no plan field.
type RequestHeader struct {
	Header json.RawMessage `json:"header"`
	Reason string          `json:"reason"`
}

// UserMessage is the data of user/message, in createUserMessage's key order.
// Content is the array of content parts; Source is {kind:'user'} or
// {kind:'plugin', plugin, form?, summary?}.
type UserMessage struct {
	Content json.RawMessage `json:"content"`
	Source  json.RawMessage `json:"source"`
	Role    string          `json:"role"`
	ID      string          `json:"id"`
}

// CommandRun is the data of command/run. Args is the verbatim raw input (including the
// separator whitespace) and is absent when the command does not record its input.
type CommandRun struct {
	CommandID string          `json:"commandId"`
	Name      string          `json:"name"`
	Args      *string         `json:"args,omitempty"`
	Source    json.RawMessage `json:"source"`
}

// Command outcome kinds.
const (
	CommandSuccess = "success"
	CommandError   = "error"
)

// CommandDone is the data of command/done; it pairs with command/run by CommandID.
type CommandDone struct {
	CommandID      string  `json:"commandId"`
	Kind           string  `json:"kind"`
	Text           *string `json:"text,omitempty"`
	SourceEventSeq *int64  `json:"sourceEventSeq,omitempty"`
}

// surfaceAppend is the surfaceOp of an appended surface event.
var surfaceAppend = json.RawMessage(`"append"`)

// NewEvent builds an event of type typ whose data is payload marshalled to JSON (a
// json.RawMessage or []byte payload is used as is). Seq is left 0 and Time is left 0 (Append
// fills it); number a batch with Sequence. user/message events get surfaceOp "append", as the
// harness writes them.
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
	if typ == TypeUserMessage {
		ev.SurfaceOp = surfaceAppend
	}
	return ev, nil
}

// MustEvent is NewEvent for payloads that cannot fail to marshal (the typed structs above);
// it panics on a marshalling error, so use it only with such payloads.
func MustEvent(typ string, payload any) Event {
	ev, err := NewEvent(typ, payload)
	if err != nil {
		panic(err)
	}
	return ev
}

// Sequence numbers events contiguously from next (normally Tail.NextSeq) in place and returns
// them, ready for Append.
func Sequence(next int64, events ...Event) []Event {
	for i := range events {
		events[i].Seq = next + int64(i)
	}
	return events
}

// Decode unmarshals the event's data into v (one of the typed payloads above).
func (e Event) Decode(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("decode %s data at seq %d: %w", e.Type, e.Seq, err)
	}
	return nil
}

// TextContent renders a single text content part list: [{"type":"text","text":text}].
func TextContent(text string) json.RawMessage {
	b, _ := json.Marshal([]struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{{Type: "text", Text: text}})
	return b
}

// UserSource is the provenance of a human prompt: {"kind":"user"}.
var UserSource = json.RawMessage(`{"kind":"user"}`)

// NewUserText builds a user/message payload for a human prompt with the given message id.
func NewUserText(id, text string) UserMessage {
	return UserMessage{Content: TextContent(text), Source: UserSource, Role: "user", ID: id}
}

// NewPluginNotice builds a plugin notice user/message payload as the harness's plan mode
// writes it: content [{type:'text', text}], source {kind:'plugin', plugin, form:'notice',
// summary:text}, role 'user'.
func NewPluginNotice(id, plugin, text string) UserMessage {
	src, _ := json.Marshal(struct {
		Kind    string `json:"kind"`
		Plugin  string `json:"plugin"`
		Form    string `json:"form"`
		Summary string `json:"summary"`
	}{Kind: "plugin", Plugin: plugin, Form: "notice", Summary: text})
	return UserMessage{Content: TextContent(text), Source: src, Role: "user", ID: id}
}

// nowMillis is the harness's Date.now().
func nowMillis() int64 { return time.Now().UnixMilli() }
