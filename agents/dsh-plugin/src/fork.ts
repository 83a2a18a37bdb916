// spec.fork honoured by the agent as by the Go SDK (pkg/agentsdk seedFork, docs/protocol.md
// section 4): when the store has no session spec.sessionID yet, it is seeded from the parent's
// prefix before the harness's first append, which would otherwise create it without its
// parent. The seed is one compare-and-swap append that creates the session: whichever of the
// agent and the manager comes first seeds it, the other finds it done.
import { ConflictError, foldTail, type LogEvent } from './events.js';
import type { AgentSession } from './kube.js';
import type { LogStore } from './log-store.js';

/** The prefix of parent's events a fork through throughSeq (< 0: the last turn/end) takes. */
export function forkPrefix(parentId: string, events: readonly LogEvent[], throughSeq: number): LogEvent[] {
  if (throughSeq < 0) {
    let end = -1;
    for (const ev of events) if (ev.type === 'turn/end') end = ev.seq;
    return events.slice(0, end + 1);
  }
  const prefix = events.slice(0, throughSeq + 1);
  const t = foldTail(prefix, parentId);
  // The Go store's ForkBoundaryError, the harness's wording.
  if (t.turnOpen) throw new Error(`fork boundary ${throughSeq} in session "${parentId}" ends inside open turn ${t.turn}`);
  return prefix;
}

export async function seedFork(store: LogStore, s: AgentSession, log: (msg: string, ...args: unknown[]) => void): Promise<void> {
  const f = s.spec.fork;
  const id = s.spec.sessionID;
  if (f === undefined || (await store.info(id)) !== undefined) return;
  if ((await store.info(f.sessionID)) === undefined) {
    throw new Error(`spec.fork names session "${f.sessionID}", which the log store does not hold; fork an existing session`);
  }
  const through = f.throughSeq ?? -1;
  const parentTail = await store.tail(f.sessionID);
  if (through >= parentTail.nextSeq) throw new Error(`fork boundary ${through} in session "${f.sessionID}" is past its last event (next seq ${parentTail.nextSeq})`);
  const prefix = forkPrefix(f.sessionID, await store.readFrom(f.sessionID, 0, through >= 0 ? through + 1 : 0), through);
  if (prefix.length === 0) {
    // Nothing to copy: an empty seed creates no session here, so the manager's reconcile
    // (which can create an empty one) seeds it.
    log('spec.fork of %s: the parent has no completed turn to seed from; the manager seeds the fork', f.sessionID);
    return;
  }
  try {
    await store.append(id, prefix, { header: { createdAt: Date.now(), parentSession: f.sessionID, seedLength: prefix.length } });
    log('seeded session %s from %s (%d events, spec.fork)', id, f.sessionID, prefix.length);
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e; // seeded by the manager meanwhile
  }
}
