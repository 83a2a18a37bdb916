// The operations the plugin needs of the operator's log store, met by SqliteLogStore
// (node:sqlite, synchronous) and PostgresLogStore (pg, asynchronous): callers await every
// result, so either backend serves the persistence backend and the protocol plugin.
import type { LogEvent, Tail } from './events.js';

export type Awaitable<T> = T | Promise<T>;

/**
 * The session header the store keeps: the sessions row's columns, and the harness's own header
 * fields in session_headers (pkg/sessionlog header.go). The format version is the reader's.
 */
export interface SessionRow extends HarnessHeaderFields { id: string; createdAt: number; parentSession?: string; seedLength: number }

/** The harness's header fields beside the sessions row (absent when the writer had none). */
export interface HarnessHeaderFields { cwd?: string; origin?: string; agentPreset?: string; delegationDepth?: number }

export interface Owner { namespace: string; name: string; uid: string }

export interface AppendOptions {
  /** Header of a session this append creates (default: created now, no parent). */
  header?: { createdAt?: number; parentSession?: string; seedLength?: number } & HarnessHeaderFields;
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
  close(): Awaitable<void>;
}
