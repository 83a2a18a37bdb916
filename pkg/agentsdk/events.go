package agentsdk

import (
	"crypto/rand"
	"encoding/json"
	"fmt"

	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// Event types the agent appends (the manager appends only plan/mode), re-exported from
// pkg/sessionlog so an agent needs one import.
const (
	TypeTurnStart     = sessionlog.TypeTurnStart
	TypeTurnEnd       = sessionlog.TypeTurnEnd
	TypeStepStart     = sessionlog.TypeStepStart
	TypeStepEnd       = sessionlog.TypeStepEnd
	TypeUserMessage   = sessionlog.TypeUserMessage
	TypeRequestHeader = sessionlog.TypeRequestHeader
	TypeToolCall      = "tool/call"
	TypeToolResult    = "tool/result"
	TypePlanMode      = sessionlog.TypePlanMode
)

// Notice texts of the harness (reference spec §4.7), from pkg/planmode. The manager chooses the
// text; these are here so agents and tests can recognise them.
const (
	NoticeEnter = planmode.NoticePlanOn
	NoticeLeave = planmode.NoticeDefault
)

// Exit tool of the harness (reference spec §4.9), from pkg/planmode. It is declared only while
// plan mode is committed (the newest seed: "admitted only while the committed plan state is
// active").
const (
	ExitToolName        = planmode.ExitToolName
	ExitToolDescription = planmode.ExitToolDescription
)

// ExitToolParameters is the exit tool's JSON schema, byte for byte as the harness declares it.
var ExitToolParameters = json.RawMessage(planmode.ExitToolParameters)

// TurnEndReason is the harness's TurnEndReason ({kind: ...}).
type TurnEndReason struct {
	Kind string `json:"kind"`
	// Reason is the cause of an aborted turn ({kind:'user'|...}); omitted otherwise.
	Reason *TurnEndReason `json:"reason,omitempty"`
	// Message is an operator extension for kind "blocked" and "error": why the step proposal
	// failed (kept short; never secrets).
	Message string `json:"message,omitempty"`
}

// Turn end reasons used by the SDK and the reference agent.
var (
	TurnCompleted = TurnEndReason{Kind: "completed"}
)

// TurnBlocked is the reason for a turn whose step proposal failed (the harness's pre-step
// rejection, turn/end {kind:'blocked'}).
func TurnBlocked(msg string) TurnEndReason { return TurnEndReason{Kind: "blocked", Message: msg} }

// ContentBlock is one block of a message's content; the SDK writes text blocks only.
type ContentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// MessageSource is the harness's message provenance: {kind:'user'} or
// {kind:'plugin', plugin, form?, summary?}.
type MessageSource struct {
	Kind    string `json:"kind"`
	Plugin  string `json:"plugin,omitempty"`
	Form    string `json:"form,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// UserMessage is the harness's UserMessage, in createUserMessage's key order.
type UserMessage struct {
	Content []ContentBlock `json:"content"`
	Source  MessageSource  `json:"source"`
	Role    string         `json:"role"`
	ID      string         `json:"id"`
}

// LLMCallConfig is the request/header's call config (a subset of the harness's LlmCallConfig).
type LLMCallConfig struct {
	Provider        string `json:"provider"`
	Model           string `json:"model"`
	ReasoningEffort string `json:"reasoningEffort,omitempty"`
}

// ToolSchema is one declared tool.
type ToolSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// EpochHeader is the harness's request header: what the model was given for a request.
type EpochHeader struct {
	Config LLMCallConfig `json:"config"`
	System string        `json:"system,omitempty"`
	Tools  []ToolSchema  `json:"tools,omitempty"`
}

// Header reasons.
const (
	HeaderInitial = "initial"
	HeaderResume  = "resume"
	HeaderChange  = "change"
)

type turnEndData struct {
	Turn   int64         `json:"turn"`
	Reason TurnEndReason `json:"reason"`
}

type headerData struct {
	Header EpochHeader `json:"header"`
	Reason string      `json:"reason"`
}

type toolCallData struct {
	Turn      int64  `json:"turn"`
	Step      int64  `json:"step"`
	CallID    string `json:"callId"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolResultMessage is the harness's tool result message.
type ToolResultMessage struct {
	Role     string         `json:"role"`
	CallID   string         `json:"callId"`
	ToolName string         `json:"toolName"`
	Content  []ContentBlock `json:"content"`
	IsError  bool           `json:"isError"`
}

type toolResultData struct {
	Turn    int64             `json:"turn"`
	Step    int64             `json:"step"`
	Message ToolResultMessage `json:"message"`
}

var surfaceAppend = json.RawMessage(`"append"`)

// mustEvent builds an event from an SDK-defined payload struct, which always marshals.
func mustEvent(typ string, data any) sessionlog.Event { return sessionlog.MustEvent(typ, data) }

// TurnStart is turn/start {turn}.
func TurnStart(turn int64) sessionlog.Event {
	return mustEvent(TypeTurnStart, sessionlog.TurnStart{Turn: turn})
}

// TurnEnd is turn/end {turn, reason}.
func TurnEnd(turn int64, reason TurnEndReason) sessionlog.Event {
	return mustEvent(TypeTurnEnd, turnEndData{Turn: turn, Reason: reason})
}

// StepStart is step/start {turn, step}.
func StepStart(turn, step int64) sessionlog.Event {
	return mustEvent(TypeStepStart, sessionlog.StepStart{Turn: turn, Step: step})
}

// StepEnd is step/end {turn, step}.
func StepEnd(turn, step int64) sessionlog.Event {
	return mustEvent(TypeStepEnd, sessionlog.StepEnd{Turn: turn, Step: step})
}

// UserText is a user/message with source {kind:'user'} (a prompt or steered input).
func UserText(text string) sessionlog.Event {
	return userMessage(UserMessage{
		Content: []ContentBlock{{Type: "text", Text: text}},
		Source:  MessageSource{Kind: "user"},
		Role:    "user",
		ID:      NewID(),
	})
}

// Notice is the plan-mode plugin notice (reference spec §2.2/§4.7): a user/message whose
// source is {kind:'plugin', plugin:'plan-mode', form:'notice', summary:text}.
func Notice(text string) sessionlog.Event {
	return userMessage(UserMessage{
		Content: []ContentBlock{{Type: "text", Text: text}},
		Source:  MessageSource{Kind: "plugin", Plugin: "plan-mode", Form: "notice", Summary: text},
		Role:    "user",
		ID:      NewID(),
	})
}

func userMessage(m UserMessage) sessionlog.Event {
	ev := mustEvent(TypeUserMessage, m)
	ev.SurfaceOp = surfaceAppend
	return ev
}

// RequestHeader is request/header {header, reason}.
func RequestHeader(h EpochHeader, reason string) sessionlog.Event {
	return mustEvent(TypeRequestHeader, headerData{Header: h, Reason: reason})
}

// ToolCall is tool/call {turn, step, callId, name, arguments}.
func ToolCall(turn, step int64, callID, name, arguments string) sessionlog.Event {
	return mustEvent(TypeToolCall, toolCallData{Turn: turn, Step: step, CallID: callID, Name: name, Arguments: arguments})
}

// ToolResult is the surface tool/result {turn, step, message}.
func ToolResult(turn, step int64, callID, name, text string, isError bool) sessionlog.Event {
	ev := mustEvent(TypeToolResult, toolResultData{Turn: turn, Step: step, Message: ToolResultMessage{
		Role: "toolResult", CallID: callID, ToolName: name,
		Content: []ContentBlock{{Type: "text", Text: text}}, IsError: isError,
	}})
	ev.SurfaceOp = surfaceAppend
	return ev
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
func (t *HeaderTracker) Next(h EpochHeader, resumed bool) (ev sessionlog.Event, ok bool) {
	raw, _ := json.Marshal(h)
	reason := HeaderChange
	switch {
	case t.last == nil && resumed:
		reason = HeaderResume
	case t.last == nil:
		reason = HeaderInitial
	case string(raw) == string(t.last):
		return sessionlog.Event{}, false
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
