// exit_plan_mode: the stock plan-mode plugin's tool (schema, checks, texts) with the newest
// plan document's outcomes. The plan goes to the user through the harness's user-questions
// seam, so the seam's own refusals apply: a delegated child (a subagent) gets its
// DELEGATED_CALLER answer and never reaches a reviewer. For the root agent the seam's provider
// is the AgentSession's review (review.ts). An approval returns {approved: true} (the manager
// records the silent exit for the next boundary); keep-planning is a failed call carrying the
// feedback; a dismissal returns {approved: false} and concludes the turn.
import type { HarnessModules } from './harness.js';
import type { PluginContext, ToolDefinition } from './harness-api.js';
import {
  ExitApprovedText, ExitErrDismissed, ExitErrNoAgent, ExitErrNoChannel, ExitErrNoHeading, ExitErrNotInPlanMode, ExitErrReloaded,
  ExitParamPlanDescription, ExitToolDescription, ExitToolName, keepPlanningText, ReviewDefaultTitle,
} from './texts.js';
import type { Tails } from './session.js';

/** The review question's id, and its option labels (dsh-plan-mode). */
export const REVIEW_ID = 'plan-review';
export const APPROVE_LABEL = 'Approve';
export const KEEP_PLANNING_LABEL = 'Keep planning';

/** The user-questions error code of a review the user closed to speak instead. */
export const ASK_CANCELLED = 'ASK_CANCELLED';

/** The plan's first markdown heading (any level), or undefined when it has none. */
function firstHeading(plan: string): string | undefined {
  for (const line of plan.split('\n')) {
    const m = /^#{1,6}\s+(.+?)\s*$/.exec(line);
    if (m) return m[1];
  }
  return undefined;
}

export function exitTool(ctx: PluginContext, mods: HarnessModules, tails: Tails, disposed: () => boolean): ToolDefinition {
  return mods.defineTool({
    name: ExitToolName,
    description: ExitToolDescription,
    parameters: { plan: { type: 'string', required: true, description: ExitParamPlanDescription } },
    output: {
      schema: { type: 'object', additionalProperties: false, properties: { approved: { type: 'boolean', required: true } } },
      render: (_args, r) => [{ type: 'text', text: r?.approved === false ? ExitErrDismissed : ExitApprovedText }],
    },
    execute: async (args, exec) => {
      const agent = exec.agent;
      if (agent === undefined) throw new Error(ExitErrNoAgent);
      // Registered only while plan mode is on; a call in a step that began in plan mode and
      // whose state changed since is refused as the stock tool refuses it.
      if (!tails.of(agent.session).active) throw new Error(ExitErrNotInPlanMode);
      if (!/^#\s+\S/.test(args.plan.trim())) throw new Error(ExitErrNoHeading);
      const questions = ctx.get('userQuestions');
      if (questions === undefined) throw new Error(ExitErrNoChannel);
      let answer;
      try {
        answer = await questions.ask({
          questions: [{
            id: REVIEW_ID, header: 'Plan review', question: 'Approve this plan and leave plan mode?', detail: args.plan,
            options: [
              { label: APPROVE_LABEL, description: 'Leave plan mode; the plan is carried out from the next step.' },
              { label: KEEP_PLANNING_LABEL, description: 'Stay in plan mode; feedback goes back to the model.' },
            ],
            intent: { kind: 'plan-review', approve: APPROVE_LABEL },
          }],
          agent,
          signal: exec.signal,
        });
      } catch (e) {
        if ((e as { code?: unknown }).code !== ASK_CANCELLED) throw e;
        // The reviewer wants to speak: this step is the turn's last (plan mode stays on).
        exec.concludeTurn();
        return { approved: false };
      }
      if (disposed()) throw new Error(ExitErrReloaded);
      const items = answer.answers.filter((a) => a.id === REVIEW_ID);
      const item = items.length === 1 ? items[0] : undefined;
      if (item?.selected.length !== 1 || item.selected[0] !== APPROVE_LABEL || item.custom !== undefined) throw new Error(keepPlanningText(item?.custom ?? ''));
      return { approved: true };
    },
    presentCall: (args) => ({ card: 'generic', title: firstHeading(args.plan) ?? ReviewDefaultTitle, kind: 'other', content: [{ type: 'text', text: args.plan }] }),
  });
}
