// plantest-driver: a plugin of the real harness that replaces its one-shot headless runner and
// drives plan mode through the harness's own surfaces: ctx.commands.execute('/plan ...'),
// agent.followup/steer, and a scripted ctx.userQuestions provider that answers the
// exit_plan_mode review. It prints one JSON line per step on stdout for the Go suite.
//
// Environment: PLANTEST_SCENARIO (scenario JSON path), PLANTEST_MODEL_URL (the scripted model,
// which also serves /test/await and /test/release so a step can act while the model holds a
// request: the driver waits on the model's word, never on a timer).
import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import { installModelSelection } from '@deepseek-ai/dsh-agent';
import { createUserMessage } from '@deepseek-ai/dsh-llm';
import { SessionId } from '@deepseek-ai/dsh-session';
import { UserQuestionError } from '@deepseek-ai/dsh-user-questions';

export const name = 'plantest-driver';
export const inject = ['agentDefaultModel', 'agents', 'sessions', 'commands', 'userQuestions'];

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const model = process.env.PLANTEST_MODEL_URL;
const planMode = (ctx, agent) => ctx.get('planMode')?.get(agent);
const userText = (text) => createUserMessage({ content: [{ type: 'text', text }], source: { kind: 'user' } });

async function call(path) {
  const res = await fetch(model + path, { method: 'POST', signal: AbortSignal.timeout(60000) });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}: ${await res.text()}`);
}

export function apply(ctx) {
  const exit = ctx.get('appExit');
  const scenario = JSON.parse(fs.readFileSync(process.env.PLANTEST_SCENARIO, 'utf8'));
  const reviews = [...(scenario.reviews ?? [])];
  ctx.userQuestions.registerProvider({
    ask: async (request) => {
      const answer = reviews.shift() ?? 'approve';
      const q = request.questions[0];
      out({ op: 'review', header: q.header, options: q.options.map((o) => o.label), answer });
      if (answer === 'dismiss') throw new UserQuestionError('the user dismissed the question', 'ASK_CANCELLED');
      if (answer === 'approve') return { answers: [{ id: q.id, selected: ['Approve'] }] };
      if (answer === 'keep') return { answers: [{ id: q.id, selected: ['Keep planning'] }] };
      return { answers: [{ id: q.id, selected: [], custom: answer.custom }] };
    },
  });
  run(ctx, scenario).then(() => exit(0), (error) => { process.stderr.write(`plantest-driver: ${error?.stack ?? error}\n`); exit(1); });
}

async function run(ctx, scenario) {
  await ctx.get('loader')?.await();
  const selection = ctx.agentDefaultModel.currentSelection();
  const { agent } = await ctx.agents.create({
    sessionId: SessionId(`session-${randomUUID()}`),
    meta: { cwd: process.cwd() },
    agentOptions: { provider: selection.provider, model: selection.model },
    setup: (agentCtx) => { installModelSelection(agentCtx, { current: selection, assembled: undefined }); },
  });
  await agent.whenIdle();
  out({ op: 'created', session: agent.id });
  for (const step of scenario.steps) {
    if (step.cmd !== undefined) {
      const r = await ctx.commands.execute(agent, step.cmd, [], AbortSignal.timeout(60000));
      out({ op: 'cmd', line: step.cmd, result: r?.result, get: planMode(ctx, agent) });
    } else if (step.followup !== undefined) {
      agent.followup(userText(step.followup));
      out({ op: 'followup', text: step.followup });
    } else if (step.steer !== undefined) {
      agent.steer(userText(step.steer));
      out({ op: 'steer', text: step.steer });
    } else if (step.idle) {
      await agent.whenIdle();
      out({ op: 'idle', get: planMode(ctx, agent), seq: agent.session.seq });
    } else if (step.awaitRequest !== undefined) {
      await call(`/test/await?n=${step.awaitRequest}`);
      out({ op: 'request-held', n: step.awaitRequest, get: planMode(ctx, agent) });
    } else if (step.release !== undefined) {
      await call(`/test/release?n=${step.release}`);
      out({ op: 'released', n: step.release });
    } else {
      throw new Error(`unknown scenario step ${JSON.stringify(step)}`);
    }
  }
  await agent.whenIdle();
  await ctx.sessions.flush(agent.session);
  out({ op: 'done', session: agent.id, seq: agent.session.seq, get: planMode(ctx, agent) });
}
