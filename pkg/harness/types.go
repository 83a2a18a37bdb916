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

// KnownTypes are the event types the published harness (dsh 0.1.0-rc.8, its
// KNOWN_SESSION_EVENT_TYPES) declares. The harness refuses to read a log holding any other type
// unless the event is marked ignorable; the session log stores every type verbatim and uses
// this list only to tell the user which events a harness of that release would refuse.
// request/header-delta is refused outright, so it is not listed.
var KnownTypes = map[string]bool{
	"agent-preset/selected":           true,
	"agent/inbox/spliced":             true,
	"approval/asked":                  true,
	"approval/decided":                true,
	"approval/policy":                 true,
	"assistant/chunk":                 true,
	"assistant/message":               true,
	"command/done":                    true,
	"command/run":                     true,
	"compaction/end":                  true,
	"compaction/prune":                true,
	"compaction/start":                true,
	"compaction/summary":              true,
	"feedback/record":                 true,
	"goal/change":                     true,
	"hook/invoked":                    true,
	"hook/result":                     true,
	"llm/retry":                       true,
	"llm/retry-started":               true,
	"permission/preset":               true,
	"plan/mode":                       true,
	"request/context":                 true,
	"request/header":                  true,
	"sandbox/mode":                    true,
	"schedule/change":                 true,
	"session/end-seed":                true,
	"session/title":                   true,
	"session/title-llm-request":       true,
	"step/end":                        true,
	"step/start":                      true,
	"subagent/descriptor":             true,
	"team/member":                     true,
	"team/message/delivered":          true,
	"team/message/queued":             true,
	"team/task":                       true,
	"todo/write":                      true,
	"tool-workflow/agent-end":         true,
	"tool-workflow/agent-start":       true,
	"tool-workflow/run-end":           true,
	"tool-workflow/run-start":         true,
	"tool/call":                       true,
	"tool/code-dispatch":              true,
	"tool/code-dispatch-start":        true,
	"tool/result":                     true,
	"turn/end":                        true,
	"turn/start":                      true,
	"user/message":                    true,
	"web/deepseek-search-llm-request": true,
}
