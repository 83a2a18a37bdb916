// The operations the plugin needs of the operator's log store, met by SqliteLogStore
// (node:sqlite, synchronous) and PostgresLogStore (pg, asynchronous): callers await every
// result, so either backend serves the persistence backend and the protocol plugin. The rules
// both backends share with pkg/sessionlog live here: who may fork or seed a log (owner.go), the
// fork's prefix (fork.go), and a store that is no longer the one opened (identity.go).
import { apply, check, emptyTail, type LogEvent, type Tail } from './events.js';

export type Awaitable<T> = T | Promise<T>;

/** The header columns the store keeps (the harness's cwd and version are the reader's). */
export interface SessionRow { id: string; createdAt: number; parentSession?: string; seedLength: number }

export interface Owner { namespace: string; name: string; uid: string }

export interface AppendOptions {
  /** Header of a session this append creates (default: created now, no parent). */
  header?: { createdAt?: number; parentSession?: string; seedLength?: number };
  /**
   * Events of the batch below the stored next seq that are plan/mode events equal to the
   * stored ones are taken as already written (the manager wrote them, the harness mirrored
   * them in memory) instead of a conflict; anything else there is still a conflict.
   */
  adoptStoredPlanMode?: boolean;
}

export interface LogStore {
  /** Called after every append with the session and its new tail. */
  onAppend?: (sessionId: string, tail: Tail) => void;
  /** Called once, when the store is found not to be the one opened (StoreLostError). */
  onLost?: (e: StoreLostError) => void;
  /** Whether this process holds the write lock hold() takes. */
  readonly holding: boolean;
  /**
   * Takes the write lock of sessionId's log until the returned release is called: this
   * process's appends in between join it, another process's writer (the manager) waits.
   */
  hold(sessionId: string): Awaitable<() => Awaitable<void>>;
  tail(sessionId: string): Awaitable<Tail>;
  append(sessionId: string, events: readonly LogEvent[], opts?: AppendOptions): Awaitable<Tail>;
  readFrom(sessionId: string, fromSeq: number, limit?: number): Awaitable<LogEvent[]>;
  info(sessionId: string): Awaitable<SessionRow | undefined>;
  list(): Awaitable<SessionRow[]>;
  identity(): Awaitable<string>;
  claimOwner(sessionId: string, owner: Owner): Awaitable<Owner>;
  /**
   * Seeds the empty log childId with parentId's events 0..throughSeq (throughSeq < 0: through
   * its last turn/end) for the AgentSession owner, as pkg/sessionlog's Store.Fork: in one
   * transaction the parent's log must be owned by a session of owner's namespace and the
   * child's by none or owner, who is recorded as its owner (else an OwnershipError and nothing
   * written); a child that exists is a ConflictError.
   */
  fork(parentId: string, childId: string, throughSeq: number, owner: Owner): Awaitable<Tail>;
  close(): Awaitable<void>;
}

/** Which ownership rule refused a write (pkg/sessionlog OwnershipRefusal). */
export type OwnershipRefusal = 'OwnedByAnother' | 'ParentOfAnotherNamespace' | 'ParentUnowned';

/** A write the store refused because of who owns a log; nothing was written. Names no owner. */
export class OwnershipError extends Error {
  constructor(readonly refusal: OwnershipRefusal, readonly sessionId: string, readonly requester: Owner) {
    super(refusal === 'ParentOfAnotherNamespace'
      ? `session "${sessionId}" belongs to an AgentSession of another namespace: a fork copies its parent's events, so ${requester.namespace}/${requester.name} may only fork sessions of namespace "${requester.namespace}"`
      : refusal === 'ParentUnowned'
        ? `session "${sessionId}" belongs to no AgentSession (never claimed, or released), so no namespace may fork it; create an AgentSession for it first (its namespace may then fork it)`
        : `session "${sessionId}" belongs to another AgentSession: one log per session; choose another session ID`);
    this.name = 'OwnershipError';
  }
}

/**
 * The store is no longer the one that was opened (its SQLite file deleted or replaced, a new
 * PostgreSQL connection reaching another database): nothing is written there, every call fails
 * until the store that was opened is back. The manager reports the same as LogStoreMismatch.
 */
export class StoreLostError extends Error {
  constructor(readonly store: string, readonly opened: string, readonly found: string, why?: string) {
    const what = found !== '' ? `it now holds another store (identity ${found})` : why ?? 'its file was deleted';
    super(`the session log store ${store} is no longer the store ${opened} that was opened: ${what}; nothing is written to it. `
      + 'Restore the store (a backup keeps its identity), or restart on the new store and adopt it (docs/operations.md, "The log store was replaced")');
    this.name = 'StoreLostError';
  }
}

/** The ownership rules of a fork, on the owners read in its transaction (undefined: none). */
export function checkForkOwners(parentId: string, childId: string, owner: Owner, parentOwner: Owner | undefined, childOwner: Owner | undefined): void {
  if (owner.namespace === '' || owner.name === '') throw new Error(`fork "${parentId}" -> "${childId}": the AgentSession the fork is for (namespace and name) is required`);
  if (childOwner && (childOwner.namespace !== owner.namespace || childOwner.name !== owner.name)) throw new OwnershipError('OwnedByAnother', childId, owner);
  if (!parentOwner) throw new OwnershipError('ParentUnowned', parentId, owner);
  if (parentOwner.namespace !== owner.namespace) throw new OwnershipError('ParentOfAnotherNamespace', parentId, owner);
}

/**
 * The events a fork copies from the parent's log (all of it, from seq 0): through throughSeq,
 * which must not end inside an open turn, or, for throughSeq < 0, through the last turn/end.
 */
export function forkPrefix(parentId: string, events: readonly LogEvent[], throughSeq: number): { events: LogEvent[]; tail: Tail } {
  if (throughSeq >= events.length) throw new Error(`fork boundary ${throughSeq} in session "${parentId}" is past its last event (next seq ${events.length})`);
  const upTo = throughSeq >= 0 ? events.slice(0, throughSeq + 1) : [...events];
  const t = emptyTail();
  let lastTurnEnd = -1;
  let tailAtEnd = emptyTail();
  for (const ev of upTo) {
    apply(t, ev, check(parentId, ev));
    if (ev.type === 'turn/end') { lastTurnEnd = ev.seq; tailAtEnd = { ...t }; }
  }
  if (throughSeq < 0) return { events: upTo.slice(0, lastTurnEnd + 1), tail: lastTurnEnd >= 0 ? tailAtEnd : emptyTail() };
  if (t.turnOpen) throw new Error(`fork boundary ${throughSeq} in session "${parentId}" ends inside open turn ${t.turn}`);
  return { events: upTo, tail: t };
}

/** The annotation that adopts a store at a log end (api/v1alpha1 AnnotationAdoptLogStore). */
export const ADOPT_LOG_STORE = 'agents.harness.dev/adopt-log-store';

/**
 * Why a store with identity storeId, whose log of the session ends at logEnd, is not the one the
 * session's status was recorded against, or undefined when it is (api/v1alpha1
 * AgentSession.LogStoreMismatch, the same words): the agent then does not start.
 */
export function logStoreMismatch(s: { metadata: { name: string; annotations?: Record<string, string> }; spec: { sessionID: string }; status?: { planMode?: { storeID?: string; nextSeq?: number } } },
  storeId: string, logEnd: number): string | undefined {
  const pm = s.status?.planMode ?? {};
  const adopt = `${storeId}:${logEnd}`;
  if (storeId !== '' && s.metadata.annotations?.[ADOPT_LOG_STORE] === adopt) return undefined;
  let why: string;
  if (storeId !== '' && pm.storeID && pm.storeID !== storeId) {
    why = `the session log store has identity ${storeId}, but this session's status was recorded against store ${pm.storeID}: the store was replaced, recreated or its file deleted`;
  } else if (logEnd < (pm.nextSeq ?? 0)) {
    why = `session "${s.spec.sessionID}" ends at seq ${logEnd} in the log store, before seq ${pm.nextSeq} its status recorded: the store was emptied or restored from an older backup`;
  } else {
    return undefined;
  }
  return `${why}; nothing is appended until the right store is back, or, to continue on this one, \`kubectl annotate agentsession ${s.metadata.name} ${ADOPT_LOG_STORE}=${adopt} --overwrite\` (docs/operations.md)`;
}
