// The protocol plugin: makes the harness the agent of one AgentSession (docs/protocol.md v3).
// It replaces the stock plan-mode plugin and the headless runner in the profile overlay. Plan
// mode acts for the session's root agent, the agent of spec.sessionID; delegated children
// (subagents) keep the harness's semantics: their plan state is their own log's (a fork
// inherits the parent's, a spawned child starts inactive), they report no boundary and open
// no review (docs/agents.md).
//   - start-up (this file): one watch of the AgentSession and the namespace's
//     PlanModeConfigs, the log's owner claim, spec.fork seeded, then the root agent for
//     spec.sessionID (created, or resumed from the store: the harness's cold load closes an
//     interrupted turn);
//   - the prompt (prompt.ts): plan:policy at order 50 and exit_plan_mode admitted from each
//     agent's committed state; the root's step boundary (boundary.ts) in the
//     system-prompt/assemble waterfall; the notice last in the admitted step, a Failed answer
//     rejecting the step (here, agent/pre-step);
//   - exit_plan_mode (exit-tool.ts) through the harness's user-questions seam, whose provider
//     is the AgentSession's review (review.ts);
//   - user messages from spec.steerQueue, images included (messages.ts);
//   - /plan typed in the harness (command.ts), as the user;
//   - the between-turns lock (lock.ts, docs/protocol.md section 15).
import { loadConfig } from './config.js';
import { boundary } from './boundary.js';
import { parsePlanCommand, planPatch, planReply, planSet, refusal, stateFor, type Outcome } from './command.js';
import { exitTool } from './exit-tool.js';
import { loadHarnessModules } from './harness.js';
import type { Agent, AssembleContext, PluginContext } from './harness-api.js';
import { SessionWatch, UserWrites, type AgentSession } from './kube.js';
import { StoreLock } from './lock.js';
import { logStoreMismatch, type LogStore } from './log-store.js';
import { MessageDelivery } from './messages.js';
import { PlanPrompt } from './prompt.js';
import { ReviewProvider } from './review.js';
import { seedFork } from './fork.js';
import { RootSession, stepKey, Tails } from './session.js';
import { sharedStore } from './shared.js';
import { NoticeSourceForm, NoticeSourcePlugin, PlanCommandDescription, PlanCommandHint } from './texts.js';
import { AgentLease } from './lease.js';

const mods = await loadHarnessModules();

export const name = 'planmode-agent';
export const inject = ['systemPrompt', 'tools', 'sessions', 'agents', 'agentDefaultModel'];

/** A refused /plan write, in the user's words: the API server's reason, and the fix for an agent identity. */
function refusedAs(e: unknown): string {
  const err = e as { code?: number; body?: unknown; message?: string };
  let reason = err.message ?? String(e);
  try {
    const body = typeof err.body === 'string' ? JSON.parse(err.body) as { message?: string } : err.body as { message?: string } | undefined;
    if (body?.message) reason = body.message;
  } catch { /* not a Status */ }
  if (err.code === 403) {
    return `${reason}; this identity may not change the AgentSession (an agent identity may write only status.agent): set PLANMODE_USER_KUBECONFIG to your own kubeconfig`;
  }
  return reason;
}

export function apply(ctx: PluginContext): void {
  const cfg = loadConfig();
  const store: LogStore = sharedStore(cfg.logStore);
  const watch = new SessionWatch(cfg.namespace, cfg.name);
  const lease = new AgentLease(cfg.namespace, cfg.name, (msg, ...args) => ctx.logger?.info?.(msg, ...args)); // lease.ts
  const log = (msg: string, ...args: unknown[]) => ctx.logger?.info?.(msg, ...args);
  const tails = new Tails();
  const lock = new StoreLock(store, log);
  let root: RootSession | undefined;
  let disposed = false;

  // Resolves at the next event the harness appends to an agent's session (session/event).
  const eventWaiters = new Map<object, (() => void)[]>();
  const nextEvent = (agent: Agent) => new Promise<void>((resolve) => {
    const list = eventWaiters.get(agent.session) ?? [];
    list.push(resolve);
    eventWaiters.set(agent.session, list);
  });
  ctx.on('session/event', (session) => {
    const list = eventWaiters.get(session);
    if (!list) return;
    eventWaiters.delete(session);
    for (const r of list) r();
  });

  // The guidance in force: the PlanModeConfig status.planMode.config names, else the
  // session's configRef, else "default" (docs/protocol.md 5.1); a deleted one's last text.
  const sectionText = () => {
    const s = watch.get();
    const cfgName = s?.status?.planMode?.config?.name || s?.spec.planMode?.configRef?.name || 'default';
    return watch.config(cfgName)?.spec.section;
  };

  // The root's step boundary, once per proposed step; every other agent has none.
  const stepBoundary = async (agent: Agent, context: AssembleContext): Promise<void> => {
    const r = root;
    const s = watch.get();
    if (r === undefined || agent !== r.agent || s === undefined) return;
    const t = r.tail();
    if (!t.turnOpen || t.stepOpen) return;
    const turn = t.turn, step = t.step + 1;
    if (r.answer?.key === stepKey(turn, step)) return;
    r.answer = await boundary({ root: r, watch, store, lock, cfg, flush: () => ctx.sessions.flush(r.session), log }, s, t, turn, step, context.signal);
  };

  new PlanPrompt(ctx, { tails, sectionText, exitTool: exitTool(ctx, mods, tails, () => disposed), boundary: stepBoundary }).install();

  ctx.on('agent/pre-step', async (payload, next) => {
    const decision = await next();
    const r = root;
    if (r === undefined || payload.agent !== r.agent) return decision;
    const a = r.answer;
    if (a?.key !== stepKey(payload.turn, payload.step)) return decision;
    if (a.reject !== undefined) {
      process.stdout.write(JSON.stringify({ op: 'rejected', step: a.key, reason: a.reject }) + '\n');
      return { kind: 'reject' };
    }
    if (decision.kind === 'reject' || !a.notice) return decision;
    const notice = mods.createUserMessage({
      content: [{ type: 'text', text: a.notice }],
      source: { kind: 'plugin', plugin: NoticeSourcePlugin, form: NoticeSourceForm, summary: a.notice },
    });
    return { ...decision, messages: [...decision.messages, notice] };
  });

  ctx.get('userQuestions')?.registerProvider(new ReviewProvider(watch, cfg, mods, tails, log));

  // /plan, /plan off, /plan TEXT typed in the harness: the user's write of the AgentSession.
  const user = new UserWrites(process.env.PLANMODE_USER_KUBECONFIG, cfg.namespace, cfg.name, cfg.apiCallMs);
  ctx.inject(['commands'], (c) => {
    c.commands.register({
      name: 'plan', description: PlanCommandDescription, input: { hint: PlanCommandHint, images: true },
      handler: async ({ agent, rawInput, attachments }) => {
        const cmd = parsePlanCommand(rawInput, attachments);
        const refused = refusal(cmd);
        if (refused !== undefined) return { kind: 'error', text: refused };
        const r = root;
        if (r === undefined || agent !== r.agent) return { kind: 'error', text: '/plan: plan mode is the session\'s root agent\'s; type it at the root agent' };
        // The command's own command/run and command/done are the harness's events between
        // turns: the lock keeps the manager's commit of this very selection from taking their
        // seqs (section 15); it is released once command/done, appended when this handler
        // returns, is stored.
        const release = !r.tail().turnOpen && !lock.holding ? await lock.hold(r.id) : undefined;
        const done = () => setImmediate(() => {
          ctx.sessions.flush(r.session).catch((e: Error) => log('/plan: flush: %s', e.message)).finally(() => lock.unlock(release));
        });
        let outcome: Outcome = 'noop';
        let logged = false;
        try {
          if (release) await r.catchUp(store);
          const t = r.tail();
          logged = t.active;
          await storeImages(cmd.images);
          await user.patchSpec((cur) => {
            outcome = planSet(stateFor(cur, t.active, t.turnOpen), cmd.active).outcome;
            return planPatch(cur, cmd);
          });
        } catch (e) {
          done();
          const why = refusedAs(e);
          return { kind: 'error', text: `/plan: ${why}` };
        }
        done();
        return { kind: 'success', text: planReply(cmd, outcome, logged) };
      },
    });
  });

  // The images of a /plan, in their ConfigMaps before the message naming them is queued.
  async function storeImages(images: ReturnType<typeof parsePlanCommand>['images']): Promise<void> {
    if (images.length === 0) return;
    const attachments = ctx.get('attachments');
    const s = watch.get();
    if (attachments === undefined || s === undefined) throw new Error('image attachments are unavailable: no attachment store or no AgentSession');
    for (const img of images) {
      const { data } = await attachments.readImage(img);
      await user.storeImage(s, img, data);
    }
  }

  // The runner: the root agent of spec.sessionID, turns for the user's messages.
  const exit = ctx.get('appExit');
  // A start-up failure ends the process (the pod restarts it): an agent that cannot serve its
  // session must not sit idle looking healthy. The timer covers an app exit that hangs.
  run().catch((e: Error) => {
    process.stderr.write(`planmode-agent: ${e?.message ?? e}\n`);
    process.exitCode = 1;
    setTimeout(() => process.exit(1), 5000).unref();
    exit?.(1);
  });

  async function run(): Promise<void> {
    await ctx.get('loader')?.await();
    await watch.start();
    lease.start();
    const s0: AgentSession = watch.get()!;
    const id = s0.spec.sessionID;
    const owner = await store.claimOwner(id, { namespace: s0.metadata.namespace, name: s0.metadata.name, uid: s0.metadata.uid });
    if (owner.namespace !== s0.metadata.namespace || owner.name !== s0.metadata.name) {
      throw new Error(`session log ${id} belongs to AgentSession ${owner.namespace}/${owner.name}; give this AgentSession another spec.sessionID`);
    }
    // Not the store the session's status was recorded against: start nothing (log-store.ts).
    const mismatch = logStoreMismatch(s0, await store.identity(), (await store.tail(id)).nextSeq);
    if (mismatch !== undefined) throw new Error(`AgentSession ${s0.metadata.namespace}/${s0.metadata.name}: ${mismatch}`);
    // The store's fork is a transaction of its own, so it comes before the lock: on PostgreSQL
    // hold() makes and locks the session's row, which the fork would wait for.
    await seedFork(store, s0, log);
    const selection = ctx.agentDefaultModel.currentSelection();
    const setup = (agentCtx: unknown) => { mods.installModelSelection(agentCtx, { current: selection, assembled: undefined }); };
    const agentOptions = { provider: selection.provider, model: selection.model };
    // Start-up holds the store's write lock until the harness's first events (its presets, a
    // resumed log's repair) are stored: a plan/mode the manager commits meanwhile would
    // otherwise take a seq the harness has already given out in memory (section 15).
    const release = await lock.hold(id);
    let agent: Agent;
    try {
      const exists = (await store.info(id)) !== undefined;
      ({ agent } = exists
        ? await ctx.agents.resume({ resumeSessionId: mods.SessionId(id), agentOptions, setup })
        : await ctx.agents.create({ sessionId: mods.SessionId(id), meta: { cwd: cfg.cwd }, agentOptions, setup }));
      await agent.whenIdle();
      await ctx.sessions.flush(agent.session);
    } finally {
      await lock.unlock(release);
    }
    const r = new RootSession(agent, id, tails);
    root = r;
    process.stdout.write(JSON.stringify({ op: 'ready', session: id, seq: agent.session.seq }) + '\n');
    // Messages are taken in order, one pass at a time.
    const delivery = new MessageDelivery({ ctx, mods, root: r, watch, store, lock, cfg, log, nextEvent });
    let chain = Promise.resolve();
    ctx.on('agent/status', (payload) => {
      if (payload?.agent !== agent && payload?.agent?.id !== agent.id) return;
      // "idle" is printed once the turn is in the store (drivers and the benchmark read it).
      if (agent.status === 'idle') {
        ctx.sessions.flush(agent.session).then(() => process.stdout.write(JSON.stringify({ op: 'idle', seq: agent.session.seq }) + '\n'),
          (e: Error) => log('flush at idle: %s', e.message));
      }
      watch.onChange?.();
    });
    watch.onChange = () => { chain = chain.then(() => delivery.deliver()).catch((e: Error) => { process.stderr.write(`planmode-agent: ${e?.stack ?? e}\n`); }); };
    watch.onChange();
  }

  ctx.on('dispose', () => { disposed = true; watch.stop(); void lease.stop(); });
}
