// The harness's texts (and the operator's few of its own) the plugin shows the model or the
// user: each is its Go twin in pkg/harness texts.go, byte for byte, under the same name
// (pkg/harness's TestTypeScriptTexts fails when one differs, is missing or is extra). One
// `export const NAME = "...";` per line, the value a JSON string literal.

export const NoticePlanOn = "The user switched this session to plan mode.";
export const NoticeDefault = "The user switched this session back to the default mode.";
export const NoticeSourcePlugin = "plan-mode";
export const NoticeSourceForm = "notice";

export const ExitToolName = "exit_plan_mode";
export const ExitToolDescription = "Use only in plan mode. Present your plan for the user's review and, on approval, leave plan mode. Send the COMPLETE plan as markdown, starting with a # heading that names it. The user may approve (carry out the plan from your next step) or keep planning — their feedback comes back in the tool result; revise and present again.";
export const ExitParamPlanDescription = "The complete plan, as markdown, starting with a # heading that names it.";
export const ReviewDefaultTitle = "Plan";

export const ExitApprovedText = "Plan approved — plan mode exited; carry out the plan starting with your next step.";
export const ExitErrNotInPlanMode = "exit_plan_mode is only available in plan mode";
export const ExitErrNoHeading = "exit_plan_mode requires a non-empty markdown plan starting with a # heading";
export const ExitErrDismissed = "The user dismissed the plan review to speak instead; stay in plan mode, stop here, and wait for their message.";
export const ExitErrAborted = "ask_user_question was aborted before the user answered";
export const ExitKeepPlanningGeneric = "The user chose to keep planning; revise the plan and present it again.";
export const keepPlanningPrefix = "The user chose to keep planning; their feedback: ";
export const ExitErrNoAgent = "exit_plan_mode requires a calling agent (no session to switch)";
export const ExitErrNoChannel = "no user-questions channel is available to review the plan; ask the user to switch the session mode instead";
export const ExitErrReloaded = "the plan-mode service was reloaded while the plan was under review; present the plan again";
export const ExitErrReviewExpired = "the plan review expired without an answer";

export const ReplyOnCommitted = "Plan mode on. Use /plan off to leave.";
export const ReplyOnDeferred = "Entering plan mode (applies from the next step). Use /plan off to leave.";
export const ReplyOffCommitted = "Plan mode off.";
export const ReplyOffDeferred = "Leaving plan mode (applies from the next step).";
export const ReplyOffCancelled = "Plan mode entry cancelled.";
export const ReplyOffAlreadyOff = "Plan mode is already inactive.";
export const PlanOffImagesRefused = "Image attachments cannot accompany /plan off.";
export const PlanCommandDescription = "Enter or leave plan mode";
export const PlanCommandHint = "[off|message]";

/** The notice for a switch to active (pkg/harness NoticeText). */
export function noticeText(active: boolean): string {
  return active ? NoticePlanOn : NoticeDefault;
}

/** The keep-planning tool error for the reviewer's feedback (pkg/harness KeepPlanningText). */
export function keepPlanningText(feedback: string): string {
  return feedback === '' ? ExitKeepPlanningGeneric : keepPlanningPrefix + feedback;
}
