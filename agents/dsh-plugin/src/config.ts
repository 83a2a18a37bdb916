// The plugin's settings, from the environment of the agent's container (the pod spec sets
// them; docs/agents.md lists them). Bad values are refused with the variable and the fix.

import { redact } from './connstr.js';

export interface PluginConfig {
  namespace: string;
  name: string;
  /** The session log the manager uses too. */
  logStore: LogStoreLocation;
  /** The boundary wait (docs/protocol.md 5.1). */
  boundaryWaitMs: number;
  /** How long exit_plan_mode waits for a review decision. */
  reviewWaitMs: number;
  /**
   * How long exit_plan_mode waits for its review to be open (the post of status.agent.review
   * and the manager's status.review naming it); past it the call fails with the harness's
   * no-channel text (pkg/agentsdk ReviewOpenWait).
   */
  reviewOpenWaitMs: number;
  /** The bound of any other API call the plugin makes (images, /plan's writes, acknowledgements). */
  apiCallMs: number;
  /** Working directory recorded in the session header (the harness resolves paths against it). */
  cwd: string;
}

/**
 * Where the log store is: a SQLite file (sqlite:///path, or a bare path) or a PostgreSQL
 * database (postgres:// or postgresql://, as the manager's --log-store takes them). shown is
 * the location with its password masked (pkg/connstr's rule), for logs and errors.
 */
export type LogStoreLocation = { kind: 'sqlite'; path: string; shown: string } | { kind: 'postgres'; url: string; shown: string };

export function logStoreOf(url: string): LogStoreLocation {
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    const shown = redact(url);
    try { new URL(url); } catch { throw new Error(`PLANMODE_LOG_STORE=${shown}: not a valid PostgreSQL URL; use postgres://user:password@host:5432/db?sslmode=require`); }
    return { kind: 'postgres', url, shown };
  }
  return { kind: 'sqlite', path: sqlitePathOf(url), shown: url };
}

export function sqlitePathOf(url: string): string {
  if (url.startsWith('sqlite://')) {
    const rest = url.slice('sqlite://'.length);
    const q = rest.indexOf('?');
    return decodeURIComponent(q >= 0 ? rest.slice(0, q) : rest);
  }
  if (url.includes('://')) throw new Error(`PLANMODE_LOG_STORE: unsupported URL scheme in ${url.split('://')[0]}://…; use sqlite:///path/to/log.db or postgres://user:password@host:5432/db`);
  return url;
}

/** The bound of an API call off the step's path (a store call's bound, as the manager's). */
export const API_CALL_MS = 15000;

function ms(env: NodeJS.ProcessEnv, key: string, def: number): number {
  const v = env[key];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${key}=${JSON.stringify(v)}: expected a non-negative number of milliseconds`);
  return n;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): PluginConfig {
  const session = env.PLANMODE_SESSION ?? '';
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/.exec(session);
  if (!m) throw new Error(`PLANMODE_SESSION=${JSON.stringify(session)}: expected <namespace>/<name> of the AgentSession this harness serves`);
  const store = env.PLANMODE_LOG_STORE ?? '';
  if (store === '') throw new Error('PLANMODE_LOG_STORE is not set: set it to the manager\'s session log, e.g. sqlite:///var/lib/planmode/log.db');
  return {
    namespace: m[1]!, name: m[3]!, logStore: logStoreOf(store),
    boundaryWaitMs: ms(env, 'PLANMODE_BOUNDARY_WAIT_MS', 2000),
    reviewWaitMs: ms(env, 'PLANMODE_REVIEW_WAIT_MS', 30 * 60 * 1000),
    reviewOpenWaitMs: ms(env, 'PLANMODE_REVIEW_OPEN_WAIT_MS', 10000),
    apiCallMs: API_CALL_MS,
    cwd: env.PLANMODE_CWD || process.cwd(),
  };
}
