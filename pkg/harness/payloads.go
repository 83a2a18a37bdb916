package harness

import "encoding/json"

// TurnStart is the data of turn/start: it opens turn Turn. The number continues from the last
// logged turn/start.
type TurnStart struct {
	Turn int64 `json:"turn"`
}

// TurnEnd is the data of turn/end.
type TurnEnd struct {
	Turn   int64         `json:"turn"`
	Reason TurnEndReason `json:"reason"`
}

// Turn end kinds.
const (
	TurnEndCompleted   = "completed"
	TurnEndAborted     = "aborted"
	TurnEndBlocked     = "blocked"
	TurnEndError       = "error"
	TurnEndMaxTokens   = "max-tokens"
	TurnEndInterrupted = "interrupted" // written only by crash repair
)

// TurnEndReason is why a turn ended: {kind:'completed'}, {kind:'aborted', reason: cause},
// {kind:'blocked'} (the step proposal was refused), {kind:'error', error}, {kind:'max-tokens'}
// or {kind:'interrupted'}.
type TurnEndReason struct {
	Kind string `json:"kind"`
	// Reason is the cause of an aborted turn; omitted otherwise.
	Reason *AbortCause `json:"reason,omitempty"`
	// Error is the failure of an error turn (the harness's LlmFailure), verbatim.
	Error json.RawMessage `json:"error,omitempty"`
	// Message is the operator's extension for kind "blocked" and "error": why the step
	// proposal failed (kept short; never secrets). The harness does not write it.
	Message string `json:"message,omitempty"`
}

// AbortCause is the cause of an aborted turn: {kind:'user'}, {kind:'parent'},
// {kind:'hook', reason}, {kind:'disposed'} or {kind:'legacy'}.
type AbortCause struct {
	Kind string `json:"kind"`
	// Reason is a hook's reason; omitted for the other kinds.
	Reason string `json:"reason,omitempty"`
}

// TurnCompleted is the reason of a turn that finished normally.
var TurnCompleted = TurnEndReason{Kind: TurnEndCompleted}

// TurnBlocked is the reason of a turn whose step proposal failed, with why.
func TurnBlocked(msg string) TurnEndReason { return TurnEndReason{Kind: TurnEndBlocked, Message: msg} }

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

// PlanMode is the data of plan/mode: exactly {active: bool}, whether plan mode is in force
// from this point on. The last plan/mode wins; a log with none folds to inactive.
type PlanMode struct {
	Active bool `json:"active"`
}

// PlanModeEvent is the plan/mode event the manager appends at seq.
func PlanModeEvent(seq int64, active bool) Event {
	ev := MustEvent(TypePlanMode, PlanMode{Active: active})
	ev.Seq = seq
	return ev
}

// Request header reasons.
const (
	HeaderReasonInitial = "initial"
	HeaderReasonResume  = "resume"
	HeaderReasonChange  = "change"
)

// RequestHeader is the data of request/header: what the model was given for the requests
// that follow it. It has no plan field; the plan state it described is positional (the fold
// of the plan/mode events before it).
type RequestHeader struct {
	Header EpochHeader `json:"header"`
	Reason string      `json:"reason"`
}

// EpochHeader is the harness's request header.
type EpochHeader struct {
	Config LLMCallConfig `json:"config"`
	// AdapterDefaults are the provider adapter's defaults, verbatim.
	AdapterDefaults json.RawMessage `json:"adapterDefaults,omitempty"`
	// System is the rendered system prompt; it holds the plan:policy section while plan mode
	// is active.
	System string       `json:"system,omitempty"`
	Tools  []ToolSchema `json:"tools,omitempty"`
}

// LLMCallConfig is the request header's call config (the part of the harness's LlmCallConfig
// the operator reads and writes).
type LLMCallConfig struct {
	Provider        string `json:"provider"`
	Model           string `json:"model"`
	ReasoningEffort string `json:"reasoningEffort,omitempty"`
}

// ToolSchema is one tool declared to the model.
type ToolSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// UserMessage is the data of user/message (human prompts, steering and plugin notices), in
// createUserMessage's key order.
type UserMessage struct {
	Content []ContentBlock `json:"content"`
	Source  MessageSource  `json:"source"`
	Role    string         `json:"role"`
	ID      string         `json:"id"`
}

// roleUser is the role of every user/message.
const roleUser = "user"

// ContentBlock is one block of a message's content; the operator writes text blocks only.
type ContentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Message source kinds.
const (
	SourceKindUser   = "user"
	SourceKindPlugin = "plugin"
)

// MessageSource is a message's provenance: {kind:'user'} or
// {kind:'plugin', plugin, form?, summary?}. The envelope has no source field.
type MessageSource struct {
	Kind    string `json:"kind"`
	Plugin  string `json:"plugin,omitempty"`
	Form    string `json:"form,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// UserSource is the provenance of a human prompt.
var UserSource = MessageSource{Kind: SourceKindUser}

// TextContent is a content list of one text block.
func TextContent(text string) []ContentBlock {
	return []ContentBlock{{Type: "text", Text: text}}
}

// NewUserText is the user/message of a human prompt with message id id.
func NewUserText(id, text string) UserMessage {
	return UserMessage{Content: TextContent(text), Source: UserSource, Role: roleUser, ID: id}
}

// NewPluginNotice is a plugin's notice user/message as the harness's plan mode writes it:
// one text block, source {kind:'plugin', plugin, form:'notice', summary: text}.
func NewPluginNotice(id, plugin, text string) UserMessage {
	src := MessageSource{Kind: SourceKindPlugin, Plugin: plugin, Form: NoticeSourceForm, Summary: text}
	return UserMessage{Content: TextContent(text), Source: src, Role: roleUser, ID: id}
}

// CommandRun is the data of command/run. Args is the verbatim raw input (including the
// separator whitespace) and is absent when the command does not record its input.
type CommandRun struct {
	CommandID string        `json:"commandId"`
	Name      string        `json:"name"`
	Args      *string       `json:"args,omitempty"`
	Source    MessageSource `json:"source"`
}

// Command outcome kinds.
const (
	CommandSuccess = "success"
	CommandError   = "error"
)

// CommandDone is the data of command/done; it pairs with command/run by CommandID. Text is
// the handler's result text.
type CommandDone struct {
	CommandID      string  `json:"commandId"`
	Kind           string  `json:"kind"`
	Text           *string `json:"text,omitempty"`
	SourceEventSeq *int64  `json:"sourceEventSeq,omitempty"`
}

// ToolCall is the data of tool/call. Arguments is the raw JSON string from the model.
type ToolCall struct {
	Turn      int64  `json:"turn"`
	Step      int64  `json:"step"`
	CallID    string `json:"callId"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolResult is the data of the surface event tool/result, as the operator writes it.
type ToolResult struct {
	Turn    int64             `json:"turn"`
	Step    int64             `json:"step"`
	Message ToolResultMessage `json:"message"`
}

// ToolResultMessage is the tool result message the model sees.
type ToolResultMessage struct {
	Role     string         `json:"role"`
	CallID   string         `json:"callId"`
	ToolName string         `json:"toolName"`
	Content  []ContentBlock `json:"content"`
	IsError  bool           `json:"isError"`
}
