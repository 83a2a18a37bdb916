// The step boundary (docs/protocol.md section 5, v3) for the root agent: with nothing pending
// no API request and no store read; with a selection pending the report in
// status.agent.boundary and a wait for the manager's answer, the two together within the bound
// (PLANMODE_BOUNDARY_WAIT_MS). No answer in time, or a Dismissed one, lets the step go on under
// the committed state; a Failed answer (the manager could not append the selection, or refused
// the report) fails the proposal, and the selection stays pending.
import type { PluginConfig } from './config.js';
import { mustAsk, owedNotice } from './decide.js';
import type { Tail } from './events.js';
import { NotTakenInTime, type AgentSession, type LastBoundary, type SessionWatch } from './kube.js';
import type { LogStore } from './log-store.js';
import type { StoreLock } from './lock.js';
import { stepKey, type Answer, type RootSession } from './session.js';
import { noticeText } from './texts.js';

export interface BoundaryDeps {
  root: RootSession;
  watch: SessionWatch;
  store: LogStore;
  lock: StoreLock;
  cfg: PluginConfig;
  flush: () => Promise<void>;
  log: (msg: string, ...args: unknown[]) => void;
}

const answersReport = (a: LastBoundary | undefined, turn: number, step: number, seq: number): a is LastBoundary =>
  a !== undefined && a.turn === turn && a.step === step && a.seq === seq;

/** The answer for step `step` of turn `turn`, the root's next step. */
export async function boundary(d: BoundaryDeps, s: AgentSession, t: Tail, turn: number, step: number, signal?: AbortSignal): Promise<Answer> {
  const key = stepKey(turn, step);
  if (!mustAsk(s, t)) return { key, notice: owedNotice(s, t) };
  const deadline = Date.now() + d.cfg.boundaryWaitMs;
  await d.flush(); // the store now ends at session.seq
  await d.lock.committed(); // and any reader sees it (a hold's appends wait for its commit)
  const seq = d.root.session.seq;
  const b = d.root.lastReported;
  if (!b || b.turn !== turn || b.step !== step || b.seq !== seq) {
    // Remembered before it is sent: a report that may have landed is one the manager may act on.
    d.root.lastReported = { turn, step, seq };
    try {
      await d.watch.patchAgent({ boundary: { turn, step, seq, time: new Date().toISOString() } }, Math.max(0, deadline - Date.now()), signal);
    } catch (e) {
      if (!(e instanceof NotTakenInTime)) return { key, reject: `step boundary (turn ${turn}, step ${step}): report: ${(e as Error).message}` };
      d.log('boundary %s: %s; the step goes on under the committed state', key, e.message);
      return await settleUnanswered(d, key);
    }
  }
  await d.watch.waitFor(() => answersReport(d.watch.get()?.status?.planMode?.lastBoundary, turn, step, seq), Math.max(0, deadline - Date.now()), signal);
  const a = d.watch.get()?.status?.planMode?.lastBoundary;
  if (!answersReport(a, turn, step, seq) || a.result === 'Dismissed') return await settleUnanswered(d, key);
  if (a.result === 'Failed') return { key, reject: a.message ?? `the manager failed the step proposal (${a.reason})` };
  if (a.active !== undefined && a.active !== d.root.tail().active) await d.root.catchUp(d.store);
  return { key, notice: a.notice };
}

/**
 * No answer in time: the step goes on under the committed state. The manager may still act on
 * the report; the lock keeps its plan/mode from landing between here and the step's first
 * batch, and one already stored is taken now (protocol 5.1, the race of sequence F), with the
 * notice it owes.
 */
async function settleUnanswered(d: BoundaryDeps, key: string): Promise<Answer> {
  // Drivers and tests read it: the step went on without the manager's answer.
  process.stdout.write(JSON.stringify({ op: 'unanswered', step: key }) + '\n');
  await d.lock.holdUntilNextAppend(d.root.id, d.cfg.boundaryWaitMs);
  const before = d.root.tail().active;
  await d.root.catchUp(d.store);
  const after = d.root.tail();
  if (after.active !== before && after.told !== null && after.told !== after.active) return { key, notice: noticeText(after.active) };
  return { key };
}
