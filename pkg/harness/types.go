package harness

// Event types plan mode reads or writes. Their payloads are validated (Check) and the first
// seven drive the Tail fold.
const (
	TypeTurnStart     = "turn/start"
	TypeTurnEnd       = "turn/end"
	TypeStepStart     = "step/start"
	TypeStepEnd       = "step/end"
	TypeUserMessage   = "user/message"
	TypeRequestHeader = "request/header"
	TypePlanMode      = "plan/mode"
	TypeCommandRun    = "command/run"
	TypeCommandDone   = "command/done"
	TypeToolCall      = "tool/call"
	TypeToolResult    = "tool/result"
)

// The harness's other event types: stored verbatim, never interpreted here.
const (
	TypeInboxSpliced      = "agent/inbox/spliced"
	TypeSessionEndSeed    = "session/end-seed"
	TypeAssistantMessage  = "assistant/message"
	TypeAssistantChunk    = "assistant/chunk"
	TypeToolCodeDispatch  = "tool/code-dispatch"
	TypeTodoWrite         = "todo/write"
	TypeRequestContext    = "request/context"
	TypeSessionTitle      = "session/title"
	TypeLLMRetry          = "llm/retry"
	TypeLLMRetryStarted   = "llm/retry-started"
	TypeLegacyHeaderDelta = "request/header-delta"
)

// TypeSessionHeader is reserved for the header line of a harness JSONL file; no event has it.
const TypeSessionHeader = "session"

// KnownTypes are the event types the harness's session format declares. The harness refuses
// a log holding any other type unless the event is marked ignorable (the legacy
// request/header-delta is refused outright, so it is not listed).
var KnownTypes = map[string]bool{
	TypeTurnStart: true, TypeTurnEnd: true, TypeStepStart: true, TypeStepEnd: true,
	TypeUserMessage: true, TypeRequestHeader: true, TypePlanMode: true,
	TypeCommandRun: true, TypeCommandDone: true, TypeToolCall: true, TypeToolResult: true,
	TypeInboxSpliced: true, TypeSessionEndSeed: true,
	TypeAssistantMessage: true, TypeAssistantChunk: true, TypeToolCodeDispatch: true, TypeTodoWrite: true,
	TypeRequestContext: true, TypeSessionTitle: true, TypeLLMRetry: true, TypeLLMRetryStarted: true,
}
