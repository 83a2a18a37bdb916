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
	MaxTokens       int64  `json:"maxTokens,omitempty"`
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

// ContentBlock is one block of a message's content: a text block {type:'text', text} or an
// image block {type:'image', attachment}.
type ContentBlock struct {
	Type       string
	Text       string
	Attachment *ImageRef
}

// MarshalJSON writes the block in the harness's shape: a text block always has its text (even
// empty), an image block has only its attachment.
func (b ContentBlock) MarshalJSON() ([]byte, error) {
	if b.Type == ContentTypeImage {
		return json.Marshal(struct {
			Type       string    `json:"type"`
			Attachment *ImageRef `json:"attachment"`
		}{b.Type, b.Attachment})
	}
	return json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{b.Type, b.Text})
}

// UnmarshalJSON reads either shape.
func (b *ContentBlock) UnmarshalJSON(data []byte) error {
	var v struct {
		Type       string    `json:"type"`
		Text       string    `json:"text"`
		Attachment *ImageRef `json:"attachment"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*b = ContentBlock{Type: v.Type, Text: v.Text, Attachment: v.Attachment}
	return nil
}

// ImageRef is the harness's reference to a stored image (ImageAttachmentRef), in its key order:
// a content address "sha256:<hex>" and the image's intrinsic metadata.
type ImageRef struct {
	AttachmentID string `json:"attachmentId"`
	MediaType    string `json:"mediaType"`
	Width        int32  `json:"width"`
	Height       int32  `json:"height"`
	Bytes        int64  `json:"bytes"`
	Name         string `json:"name,omitempty"`
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

// Content block types.
const (
	ContentTypeText  = "text"
	ContentTypeImage = "image"
)

// TextContent is a content list of one text block.
func TextContent(text string) []ContentBlock {
	return []ContentBlock{{Type: ContentTypeText, Text: text}}
}

// NewUserText is the user/message of a human prompt with message id id.
func NewUserText(id, text string) UserMessage {
	return UserMessage{Content: TextContent(text), Source: UserSource, Role: roleUser, ID: id}
}

// NewUserImages is the user/message of a human prompt with images, as /plan steers one: the
// image blocks first, then the text block when text is not empty.
func NewUserImages(id, text string, images []ImageRef) UserMessage {
	content := make([]ContentBlock, 0, len(images)+1)
	for i := range images {
		content = append(content, ContentBlock{Type: ContentTypeImage, Attachment: &images[i]})
	}
	if text != "" {
		content = append(content, ContentBlock{Type: ContentTypeText, Text: text})
	}
	return UserMessage{Content: content, Source: UserSource, Role: roleUser, ID: id}
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

// ToolResult is the data of the surface event tool/result: the tool's answer as the user
// message the model sees. Meta is a tool's own extra data (the read tool's lines, ...),
// verbatim; the envelope's sourceEventSeqs names the tool/call it answers.
type ToolResult struct {
	Turn    int64             `json:"turn"`
	Step    int64             `json:"step"`
	Message ToolResultMessage `json:"message"`
	Meta    json.RawMessage   `json:"meta,omitempty"`
}

// ToolResultMessage is the message of a tool/result, in the harness's key order: source
// {kind:'tool', callId}, one tool-result part, role 'user', the message id.
type ToolResultMessage struct {
	Source  ToolResultSource `json:"source"`
	Content []ToolResultPart `json:"content"`
	Role    string           `json:"role"`
	ID      string           `json:"id"`
}

// ToolResultSource is a tool result's provenance: the call it answers.
type ToolResultSource struct {
	Kind   string `json:"kind"`
	CallID string `json:"callId"`
}

// SourceKindTool is the source kind of a tool result message.
const SourceKindTool = "tool"

// ToolResultPartType is the content part type of a tool result.
const ToolResultPartType = "tool-result"

// ToolResultPart is one tool-result content part: the output blocks and whether the call
// failed.
type ToolResultPart struct {
	Type       string         `json:"type"`
	ToolCallID string         `json:"toolCallId"`
	Content    []ContentBlock `json:"content"`
	IsError    bool           `json:"isError"`
}

// NewToolResult is the tool/result data of call callID's text outcome, message id id.
func NewToolResult(turn, step int64, id, callID, text string, isError bool) ToolResult {
	return ToolResult{Turn: turn, Step: step, Message: ToolResultMessage{
		Source:  ToolResultSource{Kind: SourceKindTool, CallID: callID},
		Content: []ToolResultPart{{Type: ToolResultPartType, ToolCallID: callID, Content: TextContent(text), IsError: isError}},
		Role:    roleUser,
		ID:      id,
	}}
}

// ToolOutcome is what a tool/result says, read from either shape: the harness's (above) or
// the one earlier operator releases wrote ({role:'toolResult', callId, toolName, content,
// isError}), which logs in existing stores still hold. ToolName is set only by the latter;
// the harness names the tool in the tool/call the result answers.
type ToolOutcome struct {
	CallID   string
	ToolName string
	Text     string
	IsError  bool
}

// ReadToolResult reads a tool/result's data; ok is false when it is neither shape.
func ReadToolResult(data json.RawMessage) (ToolOutcome, bool) {
	var d struct {
		Message struct {
			Source struct {
				CallID string `json:"callId"`
			} `json:"source"`
			Content  json.RawMessage `json:"content"`
			CallID   string          `json:"callId"`
			ToolName string          `json:"toolName"`
			IsError  bool            `json:"isError"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &d) != nil {
		return ToolOutcome{}, false
	}
	m := d.Message
	var parts []struct {
		Type       string          `json:"type"`
		Text       string          `json:"text"`
		ToolCallID string          `json:"toolCallId"`
		Content    json.RawMessage `json:"content"`
		IsError    bool            `json:"isError"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ToolOutcome{}, false
	}
	if m.ToolName != "" || m.CallID != "" { // the earlier operator shape
		o := ToolOutcome{CallID: m.CallID, ToolName: m.ToolName, IsError: m.IsError}
		for _, p := range parts {
			if p.Type == ContentTypeText {
				o.Text += p.Text
			}
		}
		return o, true
	}
	o := ToolOutcome{CallID: m.Source.CallID}
	found := false
	for _, p := range parts {
		if p.Type != ToolResultPartType {
			continue
		}
		found = true
		if o.CallID == "" {
			o.CallID = p.ToolCallID
		}
		o.IsError = o.IsError || p.IsError
		var blocks []ContentBlock
		if json.Unmarshal(p.Content, &blocks) == nil {
			for _, b := range blocks {
				if b.Type == ContentTypeText {
					o.Text += b.Text
				}
			}
		}
	}
	return o, found
}
