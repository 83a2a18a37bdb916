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

// Other event types of the harness this module names; their payloads are stored verbatim.
const (
	TypeSessionEndSeed    = "session/end-seed"
	TypeAssistantMessage  = "assistant/message"
	TypeAssistantChunk    = "assistant/chunk"
	TypeLegacyHeaderDelta = "request/header-delta"
)

// TypeSessionHeader is reserved for the header line of a harness JSONL file; no event has it.
const TypeSessionHeader = "session"
