// The plugin's settings, from the environment of the agent's container (the pod spec sets
// them; docs/agents.md lists them). Bad values are refused with the variable and the fix.

export interface PluginConfig {
  namespace: string;
  name: string;
  /** Path of the SQLite session log the manager uses too. */
  logStorePath: string;
  /** The boundary wait (docs/protocol.md 5.1). */
  boundaryWaitMs: number;
  /** How long exit_plan_mode waits for a review decision. */
  reviewWaitMs: number;
  /** Working directory recorded in the session header (the harness resolves paths against it). */
  cwd: string;
}

export function sqlitePathOf(url: string): string {
  if (url.startsWith('sqlite://')) {
    const rest = url.slice('sqlite://'.length);
    const q = rest.indexOf('?');
    return decodeURIComponent(q >= 0 ? rest.slice(0, q) : rest);
  }
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    throw new Error('PLANMODE_LOG_STORE: this plugin version writes the SQLite log store only; PostgreSQL (pg) is not implemented yet. Point it at the manager\'s sqlite:// store.');
  }
  if (url.includes('://')) throw new Error(`PLANMODE_LOG_STORE: unsupported URL scheme in ${url.split('://')[0]}://…; use sqlite:///path/to/log.db`);
  return url;
}

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
    namespace: m[1]!, name: m[3]!, logStorePath: sqlitePathOf(store),
    boundaryWaitMs: ms(env, 'PLANMODE_BOUNDARY_WAIT_MS', 2000),
    reviewWaitMs: ms(env, 'PLANMODE_REVIEW_WAIT_MS', 30 * 60 * 1000),
    cwd: env.PLANMODE_CWD || process.cwd(),
  };
}
