// Test plugin for the stock harness: lists the sessions of the project it runs in (the
// harness's own session query, by cwd), resumes the one named by PLANTEST_RESUME, prints its
// plan state, and runs one turn on it.
import { installModelSelection } from '@deepseek-ai/dsh-agent';
import { createUserMessage } from '@deepseek-ai/dsh-llm';
import { SessionId } from '@deepseek-ai/dsh-session';

export const name = 'planmode-test-listed';
export const inject = ['agentDefaultModel', 'agents', 'sessions', 'sessionQuery', 'planMode'];

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

export function apply(ctx) {
  const exit = ctx.get('appExit');
  (async () => {
    await ctx.get('loader')?.await();
    const listed = await ctx.sessionQuery.filterSessions([{ kind: 'cwd', values: [process.cwd()] }]);
    out({ op: 'listed', cwd: process.cwd(), ids: listed.map((r) => r.header.id) });
    const selection = ctx.agentDefaultModel.currentSelection();
    const id = process.env.PLANTEST_RESUME;
    const { agent } = await ctx.agents.resume({
      resumeSessionId: SessionId(id),
      agentOptions: { provider: selection.provider, model: selection.model },
      setup: (agentCtx) => { installModelSelection(agentCtx, { current: selection, assembled: undefined }); },
    });
    await agent.whenIdle();
    out({ op: 'resumed', session: id, get: ctx.planMode.get(agent) });
    agent.followup(createUserMessage({ content: [{ type: 'text', text: 'after resume' }], source: { kind: 'user' } }));
    await agent.whenIdle();
    await ctx.sessions.flush(agent.session);
    out({ op: 'done', session: id, get: ctx.planMode.get(agent) });
  })().then(() => exit(0), (error) => { process.stderr.write(`planmode-test-listed: ${error?.stack ?? error}\n`); exit(1); });
}
