// A session-persistence backend for dsh (ctx.sessionPersistence) that writes the harness's
// events into the operator's log store. It replaces session-persistence-jsonl in the profile
// overlay (agents/dsh-plugin/overlay.yml); the harness's PersistenceCoordinator does the
// buffering, serialization and crash repair, this class the durable primitives. Every append
// is compare-and-swap on the stored next seq; a plan/mode the manager wrote at a seq the
// harness then mirrored in memory is recognised as already stored (sqlite-store.ts,
// postgres-store.ts; the URL's scheme picks one).
import { importHarness } from './harness.js';
import { loadConfig } from './config.js';
import { sharedStore } from './shared.js';
import type { LogEvent } from './events.js';
import type { AppendOptions, HarnessHeaderFields, LogStore } from './log-store.js';

/** The harness's session header (dsh-session's SessionHeader), as it created it. */
interface Header extends HarnessHeaderFields { version: number; id: string; createdAt: number; parentSession?: string; seedLength?: number }

type Ctor = new (...args: never[]) => object;
const base = await importHarness<{ SessionPersistence: Ctor; PersistenceCoordinator: Ctor; SessionPersistenceRevision: (v: string) => unknown }>('@deepseek-ai/dsh-session-persistence');
const SessionPersistence = base.SessionPersistence as unknown as new (ctx: unknown) => Record<string, unknown>;
const PersistenceCoordinator = base.PersistenceCoordinator as unknown as new (ctx: unknown, backend: unknown, opts?: unknown) => Record<string, (...a: unknown[]) => Promise<unknown>>;

/** The harness's format version of the headers this backend reads back (rc.8 writes 0). */
const FORMAT_VERSION = 0;

/** What the store keeps of a header the harness created. */
function headerColumns(meta: Header): NonNullable<AppendOptions['header']> {
  const { cwd, origin, agentPreset, delegationDepth } = meta;
  return {
    createdAt: meta.createdAt,
    ...(meta.parentSession ? { parentSession: meta.parentSession } : {}),
    ...(meta.seedLength ? { seedLength: meta.seedLength } : {}),
    ...(cwd !== undefined ? { cwd } : {}), ...(origin !== undefined ? { origin } : {}),
    ...(agentPreset !== undefined ? { agentPreset } : {}), ...(delegationDepth !== undefined ? { delegationDepth } : {}),
  };
}

export class OperatorLogPersistence extends SessionPersistence {
  static inject = ['sessions'];
  readonly name = 'planmode-session-log';
  readonly supportsRawArtifacts = false;
  readonly store: LogStore;
  private readonly cwd: string;
  private readonly coordinator: Record<string, (...a: unknown[]) => Promise<unknown>>;

  constructor(ctx: unknown) {
    super(ctx);
    const cfg = loadConfig();
    this.cwd = cfg.cwd;
    this.store = sharedStore(cfg.logStore);
    this.coordinator = new PersistenceCoordinator(ctx, this, { preparedSessionCacheSize: 5, writeBatchMaxDelayMs: 200 });
  }

  locate(): undefined { return undefined; }
  create(meta: Header) { return this.coordinator.create!(meta); }
  append(id: string, events: readonly LogEvent[]) { return this.coordinator.append!(id, events); }
  prepare(id: string, signal?: AbortSignal) { return this.coordinator.prepare!(id, signal); }
  load(id: string) { return this.coordinator.load!(id); }
  inspect(id: string, signal?: AbortSignal) { return this.coordinator.inspect!(id, signal); }
  readFrom(id: string, fromSeq: number, signal?: AbortSignal) { return this.coordinator.readFrom!(id, fromSeq, signal); }

  // The header as the harness created it, from the store (header fields of a session another
  // writer created, an SDK agent or an import without them, default to this process's cwd and
  // depth 0), with the harness's key order.
  private async meta(id: string): Promise<Header | undefined> {
    const row = await this.store.info(id);
    if (!row) return undefined;
    return {
      version: FORMAT_VERSION, id, createdAt: row.createdAt, cwd: row.cwd ?? this.cwd,
      ...(row.parentSession ? { parentSession: row.parentSession } : {}),
      ...(row.seedLength ? { seedLength: row.seedLength } : {}),
      ...(row.origin !== undefined ? { origin: row.origin } : {}),
      delegationDepth: row.delegationDepth ?? 0,
      ...(row.agentPreset !== undefined ? { agentPreset: row.agentPreset } : {}),
    };
  }

  // The revision names the store and the stored length: an append (by the harness or the
  // manager) changes it, and the log is append-only.
  private async revision(id: string) {
    return base.SessionPersistenceRevision(`${await this.store.identity()}:${(await this.store.tail(id)).nextSeq}`);
  }

  async loadStored(id: string) {
    const meta = await this.meta(id);
    if (!meta) return undefined;
    const events = await this.store.readFrom(id, 0);
    return { meta, events, revision: base.SessionPersistenceRevision(`${await this.store.identity()}:${events.length}`) };
  }

  async readStoredRevision(id: string) {
    return (await this.store.info(id)) ? this.revision(id) : undefined;
  }

  async loadStoredFrom(id: string, fromSeq: number) {
    const meta = await this.meta(id);
    if (!meta) return undefined;
    return { meta, events: await this.store.readFrom(id, fromSeq) };
  }

  async appendBatch(meta: Header, events: readonly LogEvent[], isMaterialized: boolean) {
    await this.store.append(meta.id, events, {
      adoptStoredPlanMode: true,
      ...(isMaterialized ? {} : { header: headerColumns(meta) }),
    });
  }

  // A store transaction leaves no torn tail: only the closers of an interrupted turn.
  async commitRepair(meta: Header, _torn: unknown, closers: readonly LogEvent[]) {
    if (closers.length > 0) await this.store.append(meta.id, closers);
  }

  async list() {
    const out: Header[] = [];
    for (const r of await this.store.list()) {
      const m = await this.meta(r.id);
      if (m) out.push(m);
    }
    return out;
  }

  async close() { /* the shared store lives as long as the process */ }
}

export default OperatorLogPersistence;
