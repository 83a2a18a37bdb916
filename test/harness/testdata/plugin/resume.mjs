// plantest-resume: lists the sessions of the project it runs in (the harness's own session
// query, by cwd), resumes a session the Go suite placed in the harness's store (an operator
// export), reads its plan state, runs one turn and prints the tail of the log it wrote.
// Environment: PLANTEST_RESUME (session id).
import { installModelSelection } from '@deepseek-ai/dsh-agent';
import { createUserMessage } from '@deepseek-ai/dsh-llm';
import { SessionId } from '@deepseek-ai/dsh-session';

export const name = 'plantest-resume';
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
    out({ op: 'resumed', session: id, events: agent.session.events.length, get: ctx.planMode.get(agent) });
    agent.followup(createUserMessage({ content: [{ type: 'text', text: 'after resume' }], source: { kind: 'user' } }));
    await agent.whenIdle();
    await ctx.sessions.flush(agent.session);
    out({ op: 'done', session: id, seq: agent.session.seq, get: ctx.planMode.get(agent) });
  })().then(() => exit(0), (error) => { process.stderr.write(`plantest-resume: ${error?.stack ?? error}\n`); exit(1); });
}
