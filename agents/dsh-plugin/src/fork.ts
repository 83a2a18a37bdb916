// spec.fork honoured by the agent as by the Go SDK (pkg/agentsdk seedFork, docs/protocol.md
// section 4): when the store has no session spec.sessionID yet, it is seeded from the parent's
// prefix before the harness's first append, which would otherwise create it without its
// parent. The seed is the store's fork (log-store.ts): who may copy the parent is decided in
// its transaction, and whichever of the agent and the manager comes first seeds it, the other
// finds it done.
import { ConflictError } from './events.js';
import type { AgentSession } from './kube.js';
import type { LogStore } from './log-store.js';

/**
 * Seeds s's log from spec.fork when the store does not hold it yet. A refusal (an
 * OwnershipError: the parent belongs to another namespace or to no AgentSession; a boundary
 * inside an open turn; a missing parent) is thrown, naming spec.fork, so the agent does not
 * start: the manager says the same with ForkRefused.
 */
export async function seedFork(store: LogStore, s: AgentSession, log: (msg: string, ...args: unknown[]) => void): Promise<void> {
  const f = s.spec.fork;
  const id = s.spec.sessionID;
  if (f === undefined || (await store.info(id)) !== undefined) return; // seeded already (or refused by the manager, which says why in the status)
  const owner = { namespace: s.metadata.namespace, name: s.metadata.name, uid: s.metadata.uid };
  try {
    const t = await store.fork(f.sessionID, id, f.throughSeq ?? -1, owner);
    log('seeded session %s from %s (%d events, spec.fork)', id, f.sessionID, t.nextSeq);
  } catch (e) {
    if (e instanceof ConflictError) return; // seeded by the manager meanwhile
    throw new Error(`seed session "${id}" as a fork of "${f.sessionID}" (spec.fork): ${(e as Error).message}`, { cause: e });
  }
}
