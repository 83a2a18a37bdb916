// The protocol plugin: makes the harness the agent of one AgentSession (docs/protocol.md v2).
// It replaces the stock plan-mode plugin and the headless runner in the profile overlay:
//   - start-up: one watch of the AgentSession and the namespace's PlanModeConfigs, the log's
//     owner claim, then the harness's agent for spec.sessionID (created, or resumed from the
//     store: the harness's cold load closes an interrupted turn);
//   - the step boundary on system-prompt/assemble (the first await after the step claimed its
//     input, before the request is built): with nothing pending no API request and no store
//     read; with a selection pending the report in status.agent.boundary and a bounded wait;
//   - plan:policy from the committed state, exit_plan_mode declared only while active, the
//     notice last in the admitted step, a Failed answer rejecting the step;
//   - user messages from spec.steerQueue: an idle agent starts a turn for them, a busy one
//     steers them into its next step; status.agent.steerID once they are stored;
//   - exit_plan_mode through status.agent.review and the manager's status.review;
//   - the between-turns design (section 15): the store's write lock from the catch-up read to
//     the turn/start, so a plan/mode the manager commits between turns is never overtaken.
import { randomUUID } from 'node:crypto';
import { importHarness } from './harness.js';
import { loadConfig, type PluginConfig } from './config.js';
import { emptyTail, apply as applyEvent, check, type LogEvent, type Tail } from './events.js';
import { SessionWatch, type AgentSession, type LastBoundary } from './kube.js';
import { sharedStore } from './shared.js';
import { NOTICE_OFF, NOTICE_ON } from './notices.js';
import { mustAsk, owedNotice, pendingMessages } from './decide.js';
import { parsePlanCommand, planPatch, planResultText } from './command.js';
import { logStoreMismatch, type Awaitable, type LogStore } from './log-store.js';

const llm = await importHarness<{ createUserMessage: (m: unknown) => unknown }>('@deepseek-ai/dsh-llm');
const tools = await importHarness<{ defineTool: (t: unknown) => unknown }>('@deepseek-ai/dsh-tools');
const sessionPkg = await importHarness<{ SessionId: (s: string) => string }>('@deepseek-ai/dsh-session');
const agentPkg = await importHarness<{ installModelSelection: (ctx: unknown, sel: unknown) => void }>('@deepseek-ai/dsh-agent');

export const name = 'planmode-agent';
export const inject = ['systemPrompt', 'tools', 'sessions', 'agents', 'agentDefaultModel'];

export const EXIT_TOOL = 'exit_plan_mode';
const EXIT_DESCRIPTION = "Use only in plan mode. Present your plan for the user's review and, on approval, leave plan mode. Send the COMPLETE plan as markdown, starting with a # heading that names it. The user may approve (carry out the plan from your next step) or keep planning — their feedback comes back in the tool result; revise and present again.";
const TEXT = {
  approved: 'Plan approved — plan mode exited; carry out the plan starting with your next step.',
  notInPlanMode: 'exit_plan_mode is only available in plan mode',
  noHeading: 'exit_plan_mode requires a non-empty markdown plan starting with a # heading',
  dismissed: 'The user dismissed the plan review to speak instead; stay in plan mode, stop here, and wait for their message.',
  keepPlanning: 'The user chose to keep planning; revise the plan and present it again.',
  aborted: 'ask_user_question was aborted before the user answered',
  expired: 'the plan review expired without an answer',
};

/* eslint-disable @typescript-eslint/no-explicit-any */
type Any = any;

/** Incremental fold of the harness's in-memory session: O(new events) per step. */
class MemoryTail {
  private n = 0;
  readonly t: Tail = emptyTail();
  of(events: readonly LogEvent[]): Tail {
    for (; this.n < events.length; this.n++) {
      const ev = events[this.n]!;
      try { applyEvent(this.t, ev, check('', ev)); } catch { this.t.nextSeq = ev.seq + 1; }
    }
    return this.t;
  }
}

interface Answer { key: string; reject?: string; notice?: string }

export function apply(ctx: Any): void {
  const cfg: PluginConfig = loadConfig();
  const store: LogStore = sharedStore(cfg.logStore);
  const watch = new SessionWatch(cfg.namespace, cfg.name);
  const answers = new WeakMap<object, Answer>();
  const tails = new WeakMap<object, MemoryTail>();
  let lastReported: { turn: number; step: number; seq: number } | undefined;
  let lastRecorded: string | undefined;
  const log = (msg: string, ...args: unknown[]) => ctx.logger?.info?.(msg, ...args);
  const tailOf = (session: Any): Tail => {
    let m = tails.get(session);
    if (!m) { m = new MemoryTail(); tails.set(session, m); }
    return m.of(session.events);
  };
  const answersReport = (a: LastBoundary | undefined, turn: number, step: number, seq: number) => a !== undefined && a.turn === turn && a.step === step && a.seq === seq;

  // Mirrors plan/mode events the manager stored past the harness's in-memory end (its seq
  // counter), so the harness's next event takes the next free seq.
  const catchUp = async (session: Any, id: string): Promise<void> => {
    const stored = await store.readFrom(id, session.seq);
    for (const ev of stored) {
      if (ev.type !== 'plan/mode') throw new Error(`session log ${id}: seq ${ev.seq} holds ${ev.type} written by another process; one live writer per session`);
      session.append('plan/mode', { active: (ev.data as { active: boolean }).active });
    }
  };

  // Resolves at the next event the harness appends to session (session/event).
  const eventWaiters = new Map<object, (() => void)[]>();
  const nextEvent = (session: object) => new Promise<void>((resolve) => {
    const list = eventWaiters.get(session) ?? [];
    list.push(resolve);
    eventWaiters.set(session, list);
  });
  ctx.on('session/event', (session: object) => {
    const list = eventWaiters.get(session);
    if (!list) return;
    eventWaiters.delete(session);
    for (const r of list) r();
  });

  // Releases the store's write lock held by the protocol once the harness's next batch is
  // stored (or after a bound, should the harness write nothing).
  let releaseHeld: (() => void) | undefined;
  // A release that fails (the database went away) ends the transaction anyway; it is logged.
  // SQLite's release is synchronous and must stay so: the next hold() may follow at once.
  const unlock = (release: (() => Awaitable<void>) | undefined): Promise<void> => {
    const failed = (e: Error) => log('release the session log lock: %s', e.message);
    try {
      return Promise.resolve(release?.()).catch(failed);
    } catch (e) {
      failed(e as Error);
      return Promise.resolve();
    }
  };
  const holdUntilNextAppend = async (id: string, boundMs = 2000) => {
    if (store.holding) return;
    const release = await store.hold(id);
    const timer = setTimeout(() => done(), boundMs);
    const done = () => { clearTimeout(timer); store.onAppend = undefined; releaseHeld = undefined; void unlock(release); };
    releaseHeld = done;
    store.onAppend = () => queueMicrotask(done);
  };

  ctx.on('system-prompt/assemble', async (_assembly: Any, context: Any, next: () => Promise<Any>) => {
    let out = await next();
    const agent = context.agent;
    if (agent === undefined) return out;
    const session = agent.session;
    const t = tailOf(session);
    const s = watch.get();
    if (s !== undefined && t.turnOpen && !t.stepOpen) {
      const turn = t.turn, step = t.step + 1, key = `${turn}/${step}`;
      if (answers.get(session)?.key !== key) answers.set(session, await boundary(session, s, t, turn, step, key, context.signal));
    }
    const active = tailOf(session).active;
    const cfgName = s?.spec.planMode?.configRef?.name || 'default';
    const section = watch.config(cfgName)?.spec.section;
    out = {
      ...out,
      sections: [...out.sections.filter((x: Any) => x.name !== 'plan:policy'), ...(active && section ? [{ name: 'plan:policy', text: section }] : [])],
      tools: active ? out.tools : out.tools.filter((x: Any) => x.name !== EXIT_TOOL),
    };
    return out;
  });

  async function boundary(session: Any, s: AgentSession, t: Tail, turn: number, step: number, key: string, signal?: AbortSignal): Promise<Answer> {
    if (!mustAsk(s, t)) return { key, notice: owedNotice(s, t) };
    await ctx.sessions.flush(session); // the store now ends at session.seq
    const seq = session.seq as number;
    const deadline = Date.now() + cfg.boundaryWaitMs;
    const b = lastReported;
    if (!b || b.turn !== turn || b.step !== step || b.seq !== seq) {
      lastReported = { turn, step, seq };
      try {
        await watch.patchAgent({ boundary: { turn, step, seq, time: new Date().toISOString() } });
      } catch (e) {
        log('boundary %s: the report was not taken (%s); the step goes on under the committed state', key, (e as Error).message);
        return await settleUnanswered(session, key);
      }
    }
    await watch.waitFor(() => answersReport(watch.get()?.status?.planMode?.lastBoundary, turn, step, seq), Math.max(0, deadline - Date.now()), signal);
    const a = watch.get()?.status?.planMode?.lastBoundary;
    if (!answersReport(a, turn, step, seq) || a!.result === 'Dismissed' || (a!.result === 'Failed' && a!.reason === 'LogStoreUnavailable')) {
      return await settleUnanswered(session, key);
    }
    if (a!.result === 'Failed') return { key, reject: a!.message ?? `the manager failed the step proposal (${a!.reason})` };
    if (a!.active !== undefined && a!.active !== tailOf(session).active) await catchUp(session, s.spec.sessionID);
    return { key, notice: a!.notice };
  }

  // No answer in time: the step goes on under the committed state. The manager may still act
  // on the report; the lock keeps its plan/mode from landing between here and the step's
  // first batch, and one already stored is taken now (protocol 5.1, the race of sequence F).
  async function settleUnanswered(session: Any, key: string): Promise<Answer> {
    const s = watch.get();
    if (!s) return { key };
    await holdUntilNextAppend(s.spec.sessionID);
    const before = tailOf(session).active;
    await catchUp(session, s.spec.sessionID);
    const after = tailOf(session);
    if (after.active !== before && after.told !== null && after.told !== after.active) return { key, notice: after.active ? NOTICE_ON : NOTICE_OFF };
    return { key };
  }

  ctx.on('agent/pre-step', async (payload: Any, next: () => Promise<Any>) => {
    const decision = await next();
    const a = answers.get(payload.agent.session);
    if (a?.key !== `${payload.turn}/${payload.step}`) return decision;
    if (a.reject !== undefined) return { kind: 'reject' };
    if (decision.kind === 'reject' || !a.notice) return decision;
    return { ...decision, messages: [...decision.messages, llm.createUserMessage({ content: [{ type: 'text', text: a.notice }],
      source: { kind: 'plugin', plugin: 'plan-mode', form: 'notice', summary: a.notice } })] };
  });

  ctx.tools.register(tools.defineTool({
    name: EXIT_TOOL,
    description: EXIT_DESCRIPTION,
    parameters: { plan: { type: 'string', required: true, description: 'The complete plan, as markdown, starting with a # heading that names it.' } },
    output: {
      schema: { type: 'object', additionalProperties: false, properties: { approved: { type: 'boolean', required: true } } },
      render: (_args: unknown, r: Any) => [{ type: 'text', text: r?.approved === false ? TEXT.dismissed : TEXT.approved }],
    },
    execute: async (args: Any, exec: Any) => {
      const agent = exec.agent;
      if (agent === undefined) throw new Error(`${EXIT_TOOL} requires a calling agent`);
      if (!tailOf(agent.session).active) throw new Error(TEXT.notInPlanMode);
      if (!/^#\s+\S/.test(String(args.plan).trim())) throw new Error(TEXT.noHeading);
      const id = randomUUID();
      await watch.patchAgent({ review: { id, plan: args.plan, turn: tailOf(agent.session).turn, requestedAt: new Date().toISOString() } });
      const decided = () => { const r = watch.get()?.status?.review; return r !== undefined && r.id === id && r.phase !== 'Pending'; };
      if (!(await watch.waitFor(decided, cfg.reviewWaitMs, exec.signal))) {
        await watch.patchAgent({ review: null }).catch(() => undefined);
        if (!decided()) throw new Error(TEXT.aborted);
      }
      const r = watch.get()!.status!.review!;
      switch (r.phase) {
        case 'Approved': return { approved: true };
        case 'Dismissed':
          // The reviewer wants to speak: this step is the turn's last (plan mode stays on).
          exec.concludeTurn?.();
          return { approved: false };
        case 'KeepPlanning': throw new Error(r.message || TEXT.keepPlanning);
        case 'Expired': throw new Error(r.message || TEXT.expired);
        default: throw new Error(r.message || TEXT.notInPlanMode);
      }
    },
  }));

  // /plan, /plan off, /plan TEXT typed in the harness: the user's write of the AgentSession.
  ctx.inject(['commands'], (c: Any) => {
    c.commands.register({
      name: 'plan',
      description: 'Enter or leave plan mode (through the AgentSession, as kubectl plan does)',
      input: { hint: '[off|message]' },
      handler: async ({ agent, rawInput }: { agent: Any; rawInput: string }) => {
        const cmd = parsePlanCommand(rawInput ?? '');
        // The command's own command/run and command/done are the harness's events between
        // turns: the lock keeps the manager's commit of this very selection from taking their
        // seqs (section 15); it is released once command/done, appended when this handler
        // returns, is stored.
        const sid = watch.get()?.spec.sessionID;
        const release = agent && sid && !tailOf(agent.session).turnOpen && !store.holding ? await store.hold(sid) : undefined;
        const done = () => setImmediate(() => {
          ctx.sessions.flush(agent.session).catch((e: Error) => log('/plan: flush: %s', e.message)).finally(() => unlock(release));
        });
        try {
          if (release && sid) await catchUp(agent.session, sid);
          await SessionWatch.patchSpecAs(process.env.PLANMODE_USER_KUBECONFIG, cfg.namespace, cfg.name, (s) => planPatch(s, cmd));
        } catch (e) {
          done();
          const code = (e as { code?: number }).code;
          const why = code === 403 || code === 422
            ? 'this identity may not change the AgentSession (an agent identity may write only status.agent): set PLANMODE_USER_KUBECONFIG to your own kubeconfig'
            : (e as Error).message;
          return { kind: 'error', text: `/plan: ${why}` };
        }
        done();
        return { kind: 'success', text: planResultText(cmd) };
      },
    });
  });

  // The runner: the agent of spec.sessionID, turns for the user's messages.
  const exit = ctx.get('appExit');
  // A start-up failure ends the process (the pod restarts it): an agent that cannot serve its
  // session must not sit idle looking healthy. The timer covers an app exit that hangs.
  run().catch((e) => {
    process.stderr.write(`planmode-agent: ${e?.message ?? e}\n`);
    process.exitCode = 1;
    setTimeout(() => process.exit(1), 5000).unref();
    exit?.(1);
  });

  async function run(): Promise<void> {
    await ctx.get('loader')?.await();
    await watch.start();
    const s0 = watch.get()!;
    const id = s0.spec.sessionID;
    const owner = await store.claimOwner(id, { namespace: s0.metadata.namespace, name: s0.metadata.name, uid: s0.metadata.uid });
    if (owner.namespace !== s0.metadata.namespace || owner.name !== s0.metadata.name) {
      throw new Error(`session log ${id} belongs to AgentSession ${owner.namespace}/${owner.name}; give this AgentSession another spec.sessionID`);
    }
    // Not the store the session's status was recorded against: start nothing (log-store.ts).
    const mismatch = logStoreMismatch(s0, await store.identity(), (await store.tail(id)).nextSeq);
    if (mismatch !== undefined) throw new Error(`AgentSession ${s0.metadata.namespace}/${s0.metadata.name}: ${mismatch}`);
    const selection = ctx.agentDefaultModel.currentSelection();
    const setup = (agentCtx: unknown) => { agentPkg.installModelSelection(agentCtx, { current: selection, assembled: undefined }); };
    const agentOptions = { provider: selection.provider, model: selection.model };
    // Start-up holds the store's write lock until the harness's first events (its presets, a
    // resumed log's repair) are stored: a plan/mode the manager commits meanwhile would
    // otherwise take a seq the harness has already given out in memory (section 15).
    const release = await store.hold(id);
    let agent: Any;
    try {
      const exists = (await store.info(id)) !== undefined;
      ({ agent } = exists
        ? await ctx.agents.resume({ resumeSessionId: sessionPkg.SessionId(id), agentOptions, setup })
        : await ctx.agents.create({ sessionId: sessionPkg.SessionId(id), meta: { cwd: cfg.cwd }, agentOptions, setup }));
      await agent.whenIdle();
      await ctx.sessions.flush(agent.session);
    } finally {
      await unlock(release);
    }
    process.stdout.write(JSON.stringify({ op: 'ready', session: id, seq: agent.session.seq }) + '\n');
    // Messages are taken in order, one pass at a time: an idle agent starts a turn for them
    // (under the between-turns lock), a running one gets them as steering for its next step.
    // status.agent.steerID is written once they are in the store (log first, status second).
    let chain = Promise.resolve();
    const message = (text: string) => llm.createUserMessage({ content: [{ type: 'text', text }], source: { kind: 'user' } });
    const deliver = async () => {
      const s = watch.get();
      if (!s) return;
      const msgs = pendingMessages(s, lastRecorded);
      if (msgs.length === 0) return;
      // An open turn takes them as steering; otherwise a turn starts for them, under the
      // between-turns lock (also when the agent is still closing its last turn: the followup
      // then waits for the next one).
      for (const m of msgs) {
        if (m.images > 0) log('message %s has %d image(s); this agent forwards its text only (docs/agents.md)', m.id, m.images);
      }
      const running = tailOf(agent.session).turnOpen;
      if (running) for (const m of msgs) agent.steer(message(m.text));
      else await startTurn(agent, id, msgs.map((m) => message(m.text)));
      const last = msgs[msgs.length - 1]!;
      lastRecorded = last.id;
      process.stdout.write(JSON.stringify({ op: 'messages', ids: msgs.map((m) => m.id), running }) + '\n');
      void acknowledge(last);
    };
    const acknowledge = async (last: { id: string; text: string }) => {
      const recorded = () => agent.session.events.some((e: Any) => e.type === 'user/message' && e.data?.source?.kind === 'user'
        && e.data.content?.[0]?.text === last.text);
      // Wait on the harness's own events; an idle agent will record nothing more.
      while (!recorded() && agent.status === 'running') await Promise.race([nextEvent(agent.session), agent.whenIdle()]);
      await ctx.sessions.flush(agent.session);
      if (lastRecorded !== last.id) return; // a later batch acknowledges
      await watch.patchAgent({ steerID: last.id }).catch((e: Error) => log('acknowledge message %s: %s', last.id, e.message));
    };
    ctx.on('agent/status', (payload: Any) => {
      if (payload?.agent !== agent && payload?.agent?.id !== agent.id) return;
      // "idle" is printed once the turn is in the store (drivers and the benchmark read it).
      if (agent.status === 'idle') {
        ctx.sessions.flush(agent.session).then(() => process.stdout.write(JSON.stringify({ op: 'idle', seq: agent.session.seq }) + '\n'),
          (e: Error) => log('flush at idle: %s', e.message));
      }
      watch.onChange?.();
    });
    watch.onChange = () => { chain = chain.then(deliver).catch((e) => { process.stderr.write(`planmode-agent: ${e?.stack ?? e}\n`); }); };
    watch.onChange();
  }

  // Between turns (section 15): take the store's write lock, mirror what the manager stored
  // since the harness's last event, start the turn and release the lock once its turn/start
  // is stored. The manager's between-turns commit waits on the lock and then finds the turn
  // open, so its selection goes to the turn's first boundary instead.
  async function startTurn(agent: Any, id: string, messages: unknown[]): Promise<void> {
    if (releaseHeld) releaseHeld();
    const release = await store.hold(id);
    try {
      await catchUp(agent.session, id);
      const before = agent.session.seq as number;
      agent.followup(messages[0]);
      for (const m of messages.slice(1)) agent.steer(m);
      const started = () => agent.session.events.slice(before).some((e: Any) => e.type === 'turn/start');
      while (!started() && agent.status === 'running') await Promise.race([nextEvent(agent.session), agent.whenIdle()]);
      await ctx.sessions.flush(agent.session);
    } finally {
      await unlock(release);
    }
  }

  ctx.on('dispose', () => watch.stop());
}

