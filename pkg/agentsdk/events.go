package agentsdk

import (
	"crypto/rand"
	"encoding/json"
	"fmt"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// The SDK's event builders: the harness events an agent appends (the manager appends only
// plan/mode), in the payload types of pkg/harness.

// TurnStart is turn/start {turn}.
func TurnStart(turn int64) harness.Event {
	return harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: turn})
}

// TurnEnd is turn/end {turn, reason}.
func TurnEnd(turn int64, reason harness.TurnEndReason) harness.Event {
	return harness.MustEvent(harness.TypeTurnEnd, harness.TurnEnd{Turn: turn, Reason: reason})
}

// StepStart is step/start {turn, step}.
func StepStart(turn, step int64) harness.Event {
	return harness.MustEvent(harness.TypeStepStart, harness.StepStart{Turn: turn, Step: step})
}

// StepEnd is step/end {turn, step}.
func StepEnd(turn, step int64) harness.Event {
	return harness.MustEvent(harness.TypeStepEnd, harness.StepEnd{Turn: turn, Step: step})
}

// UserText is a user/message with source {kind:'user'} (a prompt or steered input).
func UserText(text string) harness.Event {
	return harness.MustEvent(harness.TypeUserMessage, harness.NewUserText(NewID(), text))
}

// SteeredMessage is the user/message of a message from spec.steerQueue (or spec.steer): its
// images as the harness's image blocks, then its text, as /plan steers one.
func SteeredMessage(m v1alpha1.SteerMessage) harness.Event {
	if len(m.Images) == 0 {
		return UserText(m.Text)
	}
	refs := make([]harness.ImageRef, len(m.Images))
	for i, im := range m.Images {
		refs[i] = harness.ImageRef{AttachmentID: im.AttachmentID, MediaType: im.MediaType, Width: im.Width, Height: im.Height, Bytes: im.Bytes, Name: im.Name}
	}
	return harness.MustEvent(harness.TypeUserMessage, harness.NewUserImages(NewID(), m.Text, refs))
}

// Notice is the plan-mode notice: a user/message whose source is
// {kind:'plugin', plugin:'plan-mode', form:'notice', summary:text}.
func Notice(text string) harness.Event {
	return harness.MustEvent(harness.TypeUserMessage, harness.NewPluginNotice(NewID(), harness.NoticeSourcePlugin, text))
}

// RequestHeader is request/header {header, reason}.
func RequestHeader(h harness.EpochHeader, reason string) harness.Event {
	return harness.MustEvent(harness.TypeRequestHeader, harness.RequestHeader{Header: h, Reason: reason})
}

// ToolCall is tool/call {turn, step, callId, name, arguments}.
func ToolCall(turn, step int64, callID, name, arguments string) harness.Event {
	return harness.MustEvent(harness.TypeToolCall, harness.ToolCall{Turn: turn, Step: step, CallID: callID, Name: name, Arguments: arguments})
}

// ToolResult is the surface tool/result {turn, step, message} answering call callID, in the
// harness's shape: message {source:{kind:'tool', callId}, content:[{type:'tool-result',
// toolCallId, content, isError}], role:'user', id}. The harness names the tool only in the
// tool/call, so name is not written. Its sourceEventSeqs (the tool/call's seq) is filled in
// when it is appended in one batch with that tool/call; otherwise set it with AnswerTo.
func ToolResult(turn, step int64, callID, name, text string, isError bool) harness.Event {
	_ = name // kept in the signature for callers; the harness's tool/result does not carry it
	return harness.MustEvent(harness.TypeToolResult, harness.NewToolResult(turn, step, NewID(), callID, text, isError))
}

// AnswerTo sets result's sourceEventSeqs to the seq of the tool/call it answers, for a
// tool/result appended after its call's batch.
func AnswerTo(result harness.Event, callSeq int64) harness.Event {
	result.SourceEventSeqs = []int64{callSeq}
	return result
}

// linkToolResults sets the sourceEventSeqs of each tool/result in a numbered batch that has
// none to the seq of the tool/call with its call id in the same batch, as the harness writes
// it.
func linkToolResults(evs []harness.Event) {
	calls := map[string]int64{}
	for i := range evs {
		switch evs[i].Type {
		case harness.TypeToolCall:
			var c harness.ToolCall
			if evs[i].Decode(&c) == nil {
				calls[c.CallID] = evs[i].Seq
			}
		case harness.TypeToolResult:
			if len(evs[i].SourceEventSeqs) > 0 {
				continue
			}
			if o, ok := harness.ReadToolResult(evs[i].Data); ok {
				if seq, ok := calls[o.CallID]; ok {
					evs[i].SourceEventSeqs = []int64{seq}
				}
			}
		}
	}
}

// NewID returns a random RFC 4122 version 4 UUID (the harness's MessageId).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go >= 1.24)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// HeaderTracker decides whether a request needs a request/header event and with which reason:
// the first request of this process logs "initial" (or "resume" when the log already held a
// header), later ones log "change" only when the header differs from the previous one.
// Call Next before the request and Commit once the returned event is appended.
type HeaderTracker struct {
	last, candidate []byte
}

// Next returns the request/header event for h, or ok=false when h equals the previous
// committed header. resumed tells whether the log held a request/header before this process's
// first request.
func (t *HeaderTracker) Next(h harness.EpochHeader, resumed bool) (ev harness.Event, ok bool) {
	raw, _ := json.Marshal(h)
	reason := harness.HeaderReasonChange
	switch {
	case t.last == nil && resumed:
		reason = harness.HeaderReasonResume
	case t.last == nil:
		reason = harness.HeaderReasonInitial
	case string(raw) == string(t.last):
		return harness.Event{}, false
	}
	t.candidate = raw
	return RequestHeader(h, reason), true
}

// Commit records the header of the last Next as logged.
func (t *HeaderTracker) Commit() {
	if t.candidate != nil {
		t.last, t.candidate = t.candidate, nil
	}
}
