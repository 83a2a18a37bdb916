package harness

import "encoding/json"

// Narration notices: the text of the plugin-sourced user/message recorded as the last message
// of the first admitted step after a user selection reached the log.
const (
	NoticePlanOn  = "The user switched this session to plan mode."
	NoticeDefault = "The user switched this session back to the default mode."
)

// NoticeText is the notice for a switch to active.
func NoticeText(active bool) string {
	if active {
		return NoticePlanOn
	}
	return NoticeDefault
}

// The notice's provenance: source {kind:'plugin', plugin:'plan-mode', form:'notice',
// summary:<text>} (see NewPluginNotice).
const (
	NoticeSourcePlugin = "plan-mode"
	NoticeSourceForm   = "notice"
)

// Replies of the /plan command, by the outcome of the selection.
const (
	ReplyOnCommitted   = "Plan mode on. Use /plan off to leave."
	ReplyOnDeferred    = "Entering plan mode (applies from the next step). Use /plan off to leave."
	ReplyOffCommitted  = "Plan mode off."
	ReplyOffDeferred   = "Leaving plan mode (applies from the next step)."
	ReplyOffCancelled  = "Plan mode entry cancelled."
	ReplyOffAlreadyOff = "Plan mode is already inactive."
)

// The exit_plan_mode tool, declared to the model only while plan mode is committed.
const (
	ExitToolName        = "exit_plan_mode"
	ExitToolDescription = "Use only in plan mode. Present your plan for the user's review and, on approval, leave plan mode. " +
		"Send the COMPLETE plan as markdown, starting with a # heading that names it. " +
		"The user may approve (carry out the plan from your next step) or keep planning — their feedback comes back in the tool result; revise and present again."
	// ExitToolParameters is the tool's JSON schema, byte for byte.
	ExitToolParameters = `{"type":"object","properties":{"plan":{"type":"string","description":"` + ExitParamPlanDescription + `"}},"required":["plan"]}`
)

// ExitParamPlanDescription is the description of the exit tool's one parameter, plan.
const ExitParamPlanDescription = "The complete plan, as markdown, starting with a # heading that names it."

// Results of an exit_plan_mode call: the approved result text, and the tool errors. The ones
// the harness raises are its texts byte for byte; ExitErrReviewExpired is the operator's own
// (the harness has no review expiry), used when the manager's answer carries no message.
const (
	ExitApprovedText        = "Plan approved — plan mode exited; carry out the plan starting with your next step."
	ExitErrNotInPlanMode    = "exit_plan_mode is only available in plan mode"
	ExitErrNoHeading        = "exit_plan_mode requires a non-empty markdown plan starting with a # heading"
	ExitErrDismissed        = "The user dismissed the plan review to speak instead; stay in plan mode, stop here, and wait for their message."
	ExitErrAborted          = "ask_user_question was aborted before the user answered"
	ExitKeepPlanningGeneric = "The user chose to keep planning; revise the plan and present it again."
	// ExitErrNoAgent: the tool ran without a calling agent.
	ExitErrNoAgent = "exit_plan_mode requires a calling agent (no session to switch)"
	// ExitErrNoChannel: nobody can review the plan (the harness has no user-questions channel;
	// for the operator's agents: the manager or the API server is away).
	ExitErrNoChannel = "no user-questions channel is available to review the plan; ask the user to switch the session mode instead"
	// ExitErrDelegatedCaller: the caller is a delegated child agent (a subagent), which has no
	// human to answer it (the user-questions seam's DELEGATED_CALLER).
	ExitErrDelegatedCaller = "human interaction is unavailable while the calling agent is owned by another live agent; include the unresolved question or decision in the child agent's final result"
	// ExitErrReloaded: the plan-mode service went away while the plan was under review.
	ExitErrReloaded      = "the plan-mode service was reloaded while the plan was under review; present the plan again"
	ExitErrReviewExpired = "the plan review expired without an answer"
)

// UnknownToolText is the harness's answer to a call of a tool the step does not admit (its
// UNKNOWN_TOOL error); the tool result's text is "Error: " and this.
func UnknownToolText(name string) string { return `unknown tool "` + name + `"` }

// The /plan command's refusal of image attachments with off, and its description and hint.
const (
	PlanOffImagesRefused   = "Image attachments cannot accompany /plan off."
	PlanCommandDescription = "Enter or leave plan mode"
	PlanCommandHint        = "[off|message]"
)

// keepPlanningPrefix is followed by the reviewer's feedback verbatim.
const keepPlanningPrefix = "The user chose to keep planning; their feedback: "

// KeepPlanningText is the keep-planning tool error for the reviewer's feedback.
func KeepPlanningText(feedback string) string {
	if feedback == "" {
		return ExitKeepPlanningGeneric
	}
	return keepPlanningPrefix + feedback
}

// ReviewDefaultTitle is the review card's title for a plan with no heading.
const ReviewDefaultTitle = "Plan"

// ExitToolSchema is the exit_plan_mode tool's declaration, byte for byte as the harness
// declares it.
func ExitToolSchema() ToolSchema {
	return ToolSchema{Name: ExitToolName, Description: ExitToolDescription, Parameters: json.RawMessage(ExitToolParameters)}
}
