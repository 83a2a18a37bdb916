// The operator's session-log store on SQLite, through node:sqlite: the schema, the
// compare-and-swap append and the tail maintenance of pkg/sessionlog (sqlite.go), so the
// manager (Go, another process) and the harness (this package) share one file. Every write
// is BEGIN IMMEDIATE: the seq check and the insert are one atomic step against the manager.
import { randomBytes } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { apply, check, ConflictError, emptyTail, ValidationError, type Facts, type LogEvent, type Tail } from './events.js';
import { harnessHeaderArgs, harnessHeaderOf, hasHarnessHeader, HEADER_COLS } from './header-fields.js';
import type { AppendOptions, LogStore, Owner, SessionRow } from './log-store.js';

/** The schema version pkg/sessionlog writes; a newer file is refused, as the Go store does. */
export const SCHEMA_VERSION = 1;
export const BUSY_TIMEOUT_MS = 10000;

// Byte for byte the DDL of pkg/sessionlog (sqlite.go, owner.go, identity.go, header.go): whichever of the
// manager and the agent opens a new file first creates it, and the other finds it done.
const SCHEMA = `
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
	session_id          TEXT PRIMARY KEY,
	next_seq            INTEGER NOT NULL,
	active              INTEGER NOT NULL,
	last_plan_mode_seq  INTEGER NOT NULL,
	told                INTEGER,
	turn_open           INTEGER NOT NULL,
	turn                INTEGER NOT NULL,
	last_step_start_seq INTEGER NOT NULL,
	step                INTEGER NOT NULL,
	step_open           INTEGER NOT NULL,
	created_at          INTEGER NOT NULL,
	parent              TEXT,
	seed_length         INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
	session_id        TEXT NOT NULL,
	seq               INTEGER NOT NULL,
	type              TEXT NOT NULL,
	time              INTEGER NOT NULL,
	data              TEXT NOT NULL,
	ignorable         INTEGER NOT NULL DEFAULT 0,
	source_event_seqs TEXT,
	surface_op        TEXT,
	PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS session_owners (
	session_id TEXT PRIMARY KEY,
	namespace  TEXT NOT NULL,
	name       TEXT NOT NULL,
	uid        TEXT NOT NULL,
	claimed_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS store_identity (id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS session_headers (
	session_id       TEXT PRIMARY KEY,
	cwd              TEXT,
	origin           TEXT,
	agent_preset     TEXT,
	delegation_depth INTEGER NOT NULL
) WITHOUT ROWID;
`;

const TAIL_COLS = 'next_seq, active, last_plan_mode_seq, told, turn_open, turn, last_step_start_seq, step, step_open';

export type { AppendOptions, Owner, SessionRow } from './log-store.js';

type Row = Record<string, unknown>;
const num = (v: unknown) => Number(v as number | bigint);

export class SqliteLogStore implements LogStore {
  readonly db: DatabaseSync;
  private readonly st: { tail: StatementSync; insert: StatementSync; update: StatementSync; read: StatementSync; create: StatementSync };
  private held = false;
  /** Called after every committed append with the session and its new tail. */
  onAppend?: (sessionId: string, tail: Tail) => void;

  constructor(readonly path: string, opts: { busyTimeoutMs?: number } = {}) {
    const dir = dirname(path);
    if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`open sqlite session log ${path}: directory ${dir} does not exist; create it first`);
    this.db = new DatabaseSync(path, { timeout: opts.busyTimeoutMs ?? BUSY_TIMEOUT_MS });
    // WAL beside the manager's readers; FULL so an acknowledged append survives a power loss.
    this.db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;');
    this.migrate();
    this.st = {
      tail: this.db.prepare(`SELECT ${TAIL_COLS} FROM sessions WHERE session_id = ?`),
      insert: this.db.prepare('INSERT INTO events (session_id, seq, type, time, data, ignorable, source_event_seqs, surface_op) VALUES (?, ?, ?, ?, ?, ?, ?, ?)'),
      update: this.db.prepare('UPDATE sessions SET next_seq = ?, active = ?, last_plan_mode_seq = ?, told = ?, turn_open = ?, turn = ?, last_step_start_seq = ?, step = ?, step_open = ? WHERE session_id = ?'),
      read: this.db.prepare('SELECT seq, type, time, data, ignorable, source_event_seqs, surface_op FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?'),
      create: this.db.prepare(`INSERT INTO sessions (session_id, ${TAIL_COLS}, created_at, parent, seed_length) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    };
  }

  private migrate(): void {
    this.tx(() => {
      this.db.exec(SCHEMA);
      this.db.prepare('INSERT INTO store_identity (id) SELECT ? WHERE NOT EXISTS (SELECT 1 FROM store_identity)').run(randomBytes(16).toString('hex'));
      const v = num((this.db.prepare('SELECT max(version) AS v FROM schema_version').get() as Row).v ?? 0);
      if (v > SCHEMA_VERSION) throw new Error(`sqlite session log ${this.path} has schema version ${v}; this plugin supports up to ${SCHEMA_VERSION} (upgrade the plugin)`);
      if (v < SCHEMA_VERSION) {
        this.db.exec('DELETE FROM schema_version');
        this.db.prepare('INSERT INTO schema_version (version) VALUES (?)').run(SCHEMA_VERSION);
      }
    });
  }

  /** Runs fn in a BEGIN IMMEDIATE transaction, or inside the one hold() keeps open. */
  private tx<T>(fn: () => T): T {
    if (this.held) return fn();
    this.db.exec('BEGIN IMMEDIATE');
    try {
      const out = fn();
      this.db.exec('COMMIT');
      return out;
    } catch (e) {
      this.db.exec('ROLLBACK');
      throw e;
    }
  }

  /**
   * Takes the store's write lock and keeps it until the returned release is called: every
   * append in between joins that one transaction, and another process's writer (the manager)
   * waits, for every session (SQLite has one writer). The between-turns design
   * (docs/protocol.md section 15) holds it from the agent's catch-up read to its turn/start.
   */
  hold(_sessionId?: string): () => void {
    if (this.held) throw new Error('the session log write lock is already held by this process');
    this.db.exec('BEGIN IMMEDIATE');
    this.held = true;
    return () => {
      if (!this.held) return;
      this.held = false;
      this.db.exec('COMMIT');
    };
  }

  get holding(): boolean { return this.held; }

  tail(sessionId: string): Tail {
    return this.loadTail(sessionId).tail;
  }

  private loadTail(sessionId: string): { tail: Tail; exists: boolean } {
    const r = this.st.tail.get(sessionId) as Row | undefined;
    if (r === undefined) return { tail: emptyTail(), exists: false };
    return {
      exists: true,
      tail: {
        nextSeq: num(r.next_seq), active: num(r.active) !== 0, lastPlanModeSeq: num(r.last_plan_mode_seq),
        told: r.told === null ? null : num(r.told) !== 0, turnOpen: num(r.turn_open) !== 0, turn: num(r.turn),
        lastStepStartSeq: num(r.last_step_start_seq), step: num(r.step), stepOpen: num(r.step_open) !== 0,
      },
    };
  }

  /**
   * Appends a contiguous batch with compare-and-swap: stored only if its first seq is the
   * stored next seq, else a ConflictError and nothing written. Returns the new tail.
   */
  append(sessionId: string, events: readonly LogEvent[], opts: AppendOptions = {}): Tail {
    if (sessionId === '') throw new Error('session id is empty');
    const now = Date.now();
    const batch: { ev: LogEvent; f: Facts; data: string }[] = [];
    for (const [i, ev0] of events.entries()) {
      const ev = { ...ev0, time: ev0.time === 0 || ev0.time === undefined ? now : ev0.time };
      if (i > 0 && ev.seq !== events[0]!.seq + i) {
        throw new ValidationError(sessionId, ev.seq, ev.type, 'seq', `seq ${ev.seq} does not continue the batch (expected ${events[0]!.seq + i}); seqs must be contiguous`);
      }
      const f = check(sessionId, ev);
      batch.push({ ev, f, data: JSON.stringify(ev.data) });
    }
    return this.tx(() => {
      const { tail, exists } = this.loadTail(sessionId);
      let rest = batch;
      if (opts.adoptStoredPlanMode && rest.length > 0 && rest[0]!.ev.seq < tail.nextSeq) {
        const stored = this.readRows(sessionId, rest[0]!.ev.seq, tail.nextSeq - rest[0]!.ev.seq);
        let k = 0;
        while (k < rest.length && k < stored.length && rest[k]!.ev.type === 'plan/mode' && stored[k]!.type === 'plan/mode'
          && JSON.stringify(stored[k]!.data) === rest[k]!.data) k++;
        if (k > 0 && (k === rest.length || rest[k]!.ev.seq === tail.nextSeq)) rest = rest.slice(k);
      }
      if (rest.length === 0) return tail;
      const first = rest[0]!.ev.seq;
      if (first !== tail.nextSeq) throw new ConflictError(sessionId, tail.nextSeq, first);
      for (const { ev, f, data } of rest) {
        this.st.insert.run(sessionId, ev.seq, ev.type, ev.time, data, ev.ignorable ? 1 : 0,
          ev.sourceEventSeqs?.length ? JSON.stringify(ev.sourceEventSeqs) : null,
          ev.surfaceOp === undefined ? null : JSON.stringify(ev.surfaceOp));
        apply(tail, ev, f);
      }
      const b = (x: boolean) => (x ? 1 : 0);
      const told = tail.told === null ? null : b(tail.told);
      if (exists) {
        this.st.update.run(tail.nextSeq, b(tail.active), tail.lastPlanModeSeq, told, b(tail.turnOpen), tail.turn, tail.lastStepStartSeq, tail.step, b(tail.stepOpen), sessionId);
      } else {
        const h = opts.header ?? {};
        this.st.create.run(sessionId, tail.nextSeq, b(tail.active), tail.lastPlanModeSeq, told, b(tail.turnOpen), tail.turn, tail.lastStepStartSeq, tail.step, b(tail.stepOpen),
          h.createdAt ?? now, h.parentSession ?? null, h.seedLength ?? 0);
        if (hasHarnessHeader(h)) {
          this.db.prepare(`INSERT INTO session_headers (session_id, ${HEADER_COLS}) VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING`).run(sessionId, ...harnessHeaderArgs(h));
        }
      }
      this.onAppend?.(sessionId, tail);
      return tail;
    });
  }

  private readRows(sessionId: string, fromSeq: number, limit: number): LogEvent[] {
    return (this.st.read.all(sessionId, Math.max(0, fromSeq), limit) as Row[]).map((r) => {
      const ev: LogEvent = { type: String(r.type), seq: num(r.seq), time: num(r.time), data: JSON.parse(String(r.data)) };
      if (num(r.ignorable) !== 0) ev.ignorable = true;
      if (r.source_event_seqs !== null) ev.sourceEventSeqs = JSON.parse(String(r.source_event_seqs));
      if (r.surface_op !== null) ev.surfaceOp = JSON.parse(String(r.surface_op));
      return ev;
    });
  }

  /** The events with seq >= fromSeq (all of them when limit <= 0), checked contiguous. */
  readFrom(sessionId: string, fromSeq: number, limit = 0): LogEvent[] {
    const read = () => {
      const { tail } = this.loadTail(sessionId);
      const out = this.readRows(sessionId, fromSeq, limit > 0 ? limit : -1);
      let want = Math.max(0, fromSeq);
      for (const ev of out) {
        if (ev.seq !== want) throw new Error(`session "${sessionId}" is corrupt: seq ${want} is missing`);
        want++;
      }
      if (!(limit > 0 && out.length === limit) && want < tail.nextSeq) throw new Error(`session "${sessionId}" is corrupt: seq ${want} is missing`);
      return out;
    };
    if (this.held) return read();
    // One read transaction: the rows and the next seq they are checked against agree.
    this.db.exec('BEGIN');
    try { return read(); } finally { this.db.exec('COMMIT'); }
  }

  info(sessionId: string): SessionRow | undefined {
    const r = this.db.prepare(`SELECT s.created_at, s.parent, s.seed_length, ${HEADER_COLS} FROM sessions s LEFT JOIN session_headers h USING (session_id) WHERE s.session_id = ?`).get(sessionId) as Row | undefined;
    if (r === undefined) return undefined;
    return { id: sessionId, createdAt: num(r.created_at), seedLength: num(r.seed_length), ...(r.parent !== null ? { parentSession: String(r.parent) } : {}), ...harnessHeaderOf(r) };
  }

  list(): SessionRow[] {
    return (this.db.prepare(`SELECT s.session_id, s.created_at, s.parent, s.seed_length, ${HEADER_COLS} FROM sessions s LEFT JOIN session_headers h USING (session_id) ORDER BY s.session_id`).all() as Row[]).map((r) => ({
      id: String(r.session_id), createdAt: num(r.created_at), seedLength: num(r.seed_length), ...(r.parent !== null ? { parentSession: String(r.parent) } : {}), ...harnessHeaderOf(r),
    }));
  }

  identity(): string {
    return String((this.db.prepare('SELECT id FROM store_identity').get() as Row).id);
  }

  /**
   * Records owner as the AgentSession the log belongs to when it has none (or the same
   * namespace/name claims it again with a new UID) and returns the owner that holds it.
   */
  claimOwner(sessionId: string, owner: Owner): Owner {
    return this.tx(() => {
      const r = this.db.prepare('SELECT namespace, name, uid FROM session_owners WHERE session_id = ?').get(sessionId) as Row | undefined;
      if (r === undefined) {
        this.db.prepare('INSERT INTO session_owners (session_id, namespace, name, uid, claimed_at) VALUES (?, ?, ?, ?, ?)').run(sessionId, owner.namespace, owner.name, owner.uid, Date.now());
        return owner;
      }
      if (r.namespace === owner.namespace && r.name === owner.name) {
        if (r.uid !== owner.uid) this.db.prepare('UPDATE session_owners SET uid = ? WHERE session_id = ?').run(owner.uid, sessionId);
        return owner;
      }
      return { namespace: String(r.namespace), name: String(r.name), uid: String(r.uid) };
    });
  }

  close(): void {
    if (this.held) this.db.exec('ROLLBACK');
    this.held = false;
    this.db.close();
  }
}
