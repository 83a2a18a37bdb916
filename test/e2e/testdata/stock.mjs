// Test plugin for the stock harness (its own plan-mode plugin): creates an agent in the
// working directory, selects plan mode through ctx.planMode (committed at once: the agent is
// idle), runs one turn, then leaves plan mode and runs another, so the scripted model sees one
// request in each state for the same configuration.
import { installModelSelection } from '@deepseek-ai/dsh-agent';
import { randomUUID } from 'node:crypto';
import { createUserMessage } from '@deepseek-ai/dsh-llm';
import { SessionId } from '@deepseek-ai/dsh-session';

export const name = 'planmode-test-stock';
export const inject = ['agentDefaultModel', 'agents', 'planMode'];

export function apply(ctx) {
  const exit = ctx.get('appExit');
  (async () => {
    await ctx.get('loader')?.await();
    const selection = ctx.agentDefaultModel.currentSelection();
    const { agent } = await ctx.agents.create({
      sessionId: SessionId(randomUUID()),
      meta: { cwd: process.cwd() },
      agentOptions: { provider: selection.provider, model: selection.model },
      setup: (agentCtx) => { installModelSelection(agentCtx, { current: selection, assembled: undefined }); },
    });
    for (const [active, text] of [[true, 'in plan mode'], [false, 'out of plan mode']]) {
      ctx.planMode.set(agent, active);
      agent.followup(createUserMessage({ content: [{ type: 'text', text }], source: { kind: 'user' } }));
      await agent.whenIdle();
    }
  })().then(() => exit(0), (error) => { process.stderr.write(`planmode-test-stock: ${error?.stack ?? error}\n`); exit(1); });
}
