package planmode

// Exact harness strings (reference spec §4.7, §4.8, §4.9). They are shared by the reconciler,
// the agent SDK, the reference agent and the kubectl plugin; tests pin them byte for byte.

// Narration notices (§4.7): the text of the plugin-sourced user/message recorded as the last
// message of the first admitted step after a user selection reached the log.
const (
	NoticePlanOn  = "The user switched this session to plan mode."
	NoticeDefault = "The user switched this session back to the default mode."
)

// Notice source of the narration user/message (§4.7):
// source {kind:'plugin', plugin:'plan-mode', form:'notice', summary:<text>}.
const (
	NoticeSourceKind   = "plugin"
	NoticeSourcePlugin = "plan-mode"
	NoticeSourceForm   = "notice"
)

// Prompt section (§4.2).
const (
	SectionName  = "plan:policy"
	SectionOrder = 50
)

// /plan command (§4.8).
const (
	PlanCommandName        = "plan"
	PlanCommandDescription = "Enter or leave plan mode"
	PlanCommandHint        = "[off|message]"

	ReplyOnCommitted   = "Plan mode on. Use /plan off to leave."
	ReplyOnDeferred    = "Entering plan mode (applies from the next step). Use /plan off to leave."
	ReplyOffCommitted  = "Plan mode off."
	ReplyOffDeferred   = "Leaving plan mode (applies from the next step)."
	ReplyOffCancelled  = "Plan mode entry cancelled."
	ReplyOffAlreadyOff = "Plan mode is already inactive."
	// ReplyOffAttachments is HEAD's wording; POST says "Attachments cannot accompany /plan off.".
	ReplyOffAttachments = "Image attachments cannot accompany /plan off."
)

// PlanCommandReply is the /plan handler's result text for the outcome of set() (§4.8).
// off is true for the exact trimmed argument "off"; logged is the committed state before the
// call (it only matters for an "off" noop).
func PlanCommandReply(off bool, outcome Outcome, logged bool) string {
	if !off {
		if outcome == Committed {
			return ReplyOnCommitted
		}
		// queued, cancelled and noop all answer with the deferred copy (a harness quirk for
		// noop on an already-active idle session, kept on purpose).
		return ReplyOnDeferred
	}
	switch outcome {
	case Committed:
		return ReplyOffCommitted
	case Queued:
		return ReplyOffDeferred
	case Cancelled:
		return ReplyOffCancelled
	default: // noop
		if logged {
			return ReplyOffDeferred
		}
		return ReplyOffAlreadyOff
	}
}

// exit_plan_mode tool (§4.9).
const (
	ExitToolName        = "exit_plan_mode"
	ExitToolDescription = "Use only in plan mode. Present your plan for the user's review and, on approval, leave plan mode. Send the COMPLETE plan as markdown, starting with a # heading that names it. The user may approve (carry out the plan from your next step) or keep planning — their feedback comes back in the tool result; revise and present again."
	// ExitToolParameters is the tool's JSON schema, verbatim.
	ExitToolParameters = `{"type":"object","properties":{"plan":{"type":"string","description":"The complete plan, as markdown, starting with a # heading that names it."}},"required":["plan"]}`

	ExitApprovedText = "Plan approved — plan mode exited; carry out the plan starting with your next step."

	ExitErrNoAgent          = "exit_plan_mode requires a calling agent (no session to switch)"
	ExitErrNotInPlanMode    = "exit_plan_mode is only available in plan mode"
	ExitErrNoHeading        = "exit_plan_mode requires a non-empty markdown plan starting with a # heading"
	ExitErrNoQuestions      = "no user-questions channel is available to review the plan; ask the user to switch the session mode instead"
	ExitErrDismissed        = "The user dismissed the plan review to speak instead; stay in plan mode, stop here, and wait for their message."
	ExitErrAborted          = "ask_user_question was aborted before the user answered"
	ExitErrNoProvider       = "no user-questions provider is registered"
	ExitErrDelegatedCaller  = "human interaction is unavailable while the calling agent is owned by another live agent; include the unresolved question or decision in the child agent's final result"
	ExitErrCallerNotLive    = "human interaction requires the exact live calling agent when an agent is supplied"
	ExitErrReloaded         = "the plan-mode service was reloaded while the plan was under review; present the plan again"
	ExitKeepPlanningGeneric = "The user chose to keep planning; revise the plan and present it again."
	// ExitKeepPlanningPrefix is followed by the reviewer's feedback verbatim.
	ExitKeepPlanningPrefix = "The user chose to keep planning; their feedback: "
)

// KeepPlanningText is the keep-planning tool error for the reviewer's feedback (§4.9 step 7).
func KeepPlanningText(feedback string) string {
	if feedback == "" {
		return ExitKeepPlanningGeneric
	}
	return ExitKeepPlanningPrefix + feedback
}

// Plan review question (§4.9 step 5).
const (
	ReviewQuestionID       = "plan-review"
	ReviewQuestionHeader   = "Plan review"
	ReviewQuestion         = "Approve this plan and leave plan mode?"
	ReviewApproveLabel     = "Approve"
	ReviewApproveDesc      = "Leave plan mode; the plan is carried out from the next step."
	ReviewKeepPlanningLbl  = "Keep planning"
	ReviewKeepPlanningDesc = "Stay in plan mode; feedback goes back to the model."
	ReviewResultTitle      = "Plan review"
	ReviewDefaultTitle     = "Plan"
)
