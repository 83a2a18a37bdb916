// The operator's session-log store on SQLite, through node:sqlite: the schema, the
// compare-and-swap append and the tail maintenance of pkg/sessionlog (sqlite.go), so the
// manager (Go, another process) and the harness (this package) share one file. Every write
// is BEGIN IMMEDIATE: the seq check and the insert are one atomic step against the manager.
//
// The store never creates what it did not have (pkg/sessionlog sqlite_reopen.go): before every
// call it checks that the path still names the file it opened. A deleted file, or one holding
// another store, fails every call with a StoreLostError instead of the writes going on into an
// unlinked file; the store's own backup put back (the same identity) is opened again.
import { randomBytes } from 'node:crypto';
import { existsSync, statSync, type Stats } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { apply, check, ConflictError, emptyTail, ValidationError, type Facts, type LogEvent, type Tail } from './events.js';
import { checkForkOwners, forkPrefix, StoreLostError, type AppendOptions, type LogStore, type Owner, type SessionRow } from './log-store.js';

/** The schema version pkg/sessionlog writes; a newer file is refused, as the Go store does. */
export const SCHEMA_VERSION = 1;
export const BUSY_TIMEOUT_MS = 10000;

// Byte for byte the DDL of pkg/sessionlog (sqlite.go, owner.go, identity.go): whichever of the
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
`;

const TAIL_COLS = 'next_seq, active, last_plan_mode_seq, told, turn_open, turn, last_step_start_seq, step, step_open';

export type { AppendOptions, Owner, SessionRow } from './log-store.js';

type Row = Record<string, unknown>;
const num = (v: unknown) => Number(v as number | bigint);

export class SqliteLogStore implements LogStore {
  private database!: DatabaseSync;
  private st!: { tail: StatementSync; insert: StatementSync; update: StatementSync; read: StatementSync; create: StatementSync };
  private held = false;
  /** The identity of the store that was opened, and the file it is in. */
  private readonly opened: string;
  private file!: Stats;
  private readonly timeout: number;
  /** Called after every committed append with the session and its new tail. */
  onAppend?: (sessionId: string, tail: Tail) => void;
  onLost?: (e: StoreLostError) => void;
  private lostReported = false;

  constructor(readonly path: string, opts: { busyTimeoutMs?: number } = {}) {
    const dir = dirname(path);
    if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`open sqlite session log ${path}: directory ${dir} does not exist; create it first`);
    this.timeout = opts.busyTimeoutMs ?? BUSY_TIMEOUT_MS;
    this.database = new DatabaseSync(path, { timeout: this.timeout });
    this.migrate();
    this.opened = String((this.database.prepare('SELECT id FROM store_identity').get() as Row).id);
    this.attach(this.database);
  }

  /** The open handle, once the path is checked to still name the store that was opened. */
  get db(): DatabaseSync {
    this.ensureSameStore();
    return this.database;
  }

  private attach(db: DatabaseSync): void {
    this.database = db;
    this.file = statSync(this.path);
    // WAL beside the manager's readers; FULL so an acknowledged append survives a power loss.
    db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;');
    this.st = {
      tail: db.prepare(`SELECT ${TAIL_COLS} FROM sessions WHERE session_id = ?`),
      insert: db.prepare('INSERT INTO events (session_id, seq, type, time, data, ignorable, source_event_seqs, surface_op) VALUES (?, ?, ?, ?, ?, ?, ?, ?)'),
      update: db.prepare('UPDATE sessions SET next_seq = ?, active = ?, last_plan_mode_seq = ?, told = ?, turn_open = ?, turn = ?, last_step_start_seq = ?, step = ?, step_open = ? WHERE session_id = ?'),
      read: db.prepare('SELECT seq, type, time, data, ignorable, source_event_seqs, surface_op FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?'),
      create: db.prepare(`INSERT INTO sessions (session_id, ${TAIL_COLS}, created_at, parent, seed_length) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    };
  }

  /**
   * Throws StoreLostError unless the path names the file this store opened, or, when it names
   * another file (a restore), that file holds this store's identity: then it is opened instead.
   * Nothing is created: a missing file is never opened.
   */
  private ensureSameStore(): void {
    try {
      this.checkSameStore();
    } catch (e) {
      if (e instanceof StoreLostError && !this.lostReported) {
        this.lostReported = true;
        this.onLost?.(e);
      }
      throw e;
    }
  }

  private checkSameStore(): void {
    let now: Stats;
    try { now = statSync(this.path); } catch { throw new StoreLostError(this.path, this.opened, ''); }
    if (now.ino === this.file.ino && now.dev === this.file.dev) return;
    let found = '';
    try {
      const probe = new DatabaseSync(this.path, { readOnly: true, timeout: this.timeout });
      try { found = String((probe.prepare('SELECT id FROM store_identity').get() as Row | undefined)?.id ?? ''); } finally { probe.close(); }
    } catch (e) {
      throw new StoreLostError(this.path, this.opened, '', `it holds no store identity: ${(e as Error).message}`);
    }
    if (found !== this.opened || this.held) throw new StoreLostError(this.path, this.opened, found === this.opened ? '' : found, found === this.opened ? 'its file was replaced while this process held its write lock' : undefined);
    const old = this.database;
    this.attach(new DatabaseSync(this.path, { timeout: this.timeout }));
    try { old.close(); } catch { /* its errors are why it was replaced */ }
  }

  private migrate(): void {
    const db = this.database;
    // WAL beside the manager's readers; FULL so an acknowledged append survives a power loss.
    db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;');
    db.exec('BEGIN IMMEDIATE');
    try {
      db.exec(SCHEMA);
      db.prepare('INSERT INTO store_identity (id) SELECT ? WHERE NOT EXISTS (SELECT 1 FROM store_identity)').run(randomBytes(16).toString('hex'));
      const v = num((db.prepare('SELECT max(version) AS v FROM schema_version').get() as Row).v ?? 0);
      if (v > SCHEMA_VERSION) throw new Error(`sqlite session log ${this.path} has schema version ${v}; this plugin supports up to ${SCHEMA_VERSION} (upgrade the plugin)`);
      if (v < SCHEMA_VERSION) {
        db.exec('DELETE FROM schema_version');
        db.prepare('INSERT INTO schema_version (version) VALUES (?)').run(SCHEMA_VERSION);
      }
      db.exec('COMMIT');
    } catch (e) {
      db.exec('ROLLBACK');
      throw e;
    }
  }

  /** Runs fn in a BEGIN IMMEDIATE transaction, or inside the one hold() keeps open. */
  private tx<T>(fn: () => T): T {
    const db = this.db; // checks the file first
    if (this.held) return fn();
    db.exec('BEGIN IMMEDIATE');
    try {
      const out = fn();
      db.exec('COMMIT');
      return out;
    } catch (e) {
      db.exec('ROLLBACK');
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
    void this.db; // checks the file
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
    const r = this.db.prepare('SELECT created_at, parent, seed_length FROM sessions WHERE session_id = ?').get(sessionId) as Row | undefined;
    if (r === undefined) return undefined;
    return { id: sessionId, createdAt: num(r.created_at), seedLength: num(r.seed_length), ...(r.parent !== null ? { parentSession: String(r.parent) } : {}) };
  }

  list(): SessionRow[] {
    return (this.db.prepare('SELECT session_id, created_at, parent, seed_length FROM sessions ORDER BY session_id').all() as Row[]).map((r) => ({
      id: String(r.session_id), createdAt: num(r.created_at), seedLength: num(r.seed_length), ...(r.parent !== null ? { parentSession: String(r.parent) } : {}),
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

  fork(parentId: string, childId: string, throughSeq: number, owner: Owner): Tail {
    if (parentId === '' || childId === '' || parentId === childId) throw new Error(`fork "${parentId}" -> "${childId}": session ids must be non-empty and differ`);
    return this.tx(() => {
      const ownerOf = (id: string) => {
        const r = this.database.prepare('SELECT namespace, name, uid FROM session_owners WHERE session_id = ?').get(id) as Row | undefined;
        return r === undefined ? undefined : { namespace: String(r.namespace), name: String(r.name), uid: String(r.uid) };
      };
      if (this.info(parentId) === undefined) throw new Error(`fork "${parentId}": session "${parentId}" not found`);
      checkForkOwners(parentId, childId, owner, ownerOf(parentId), ownerOf(childId));
      const { tail: existing, exists } = this.loadTail(childId);
      if (exists) throw new ConflictError(childId, existing.nextSeq, 0);
      const { events, tail } = forkPrefix(parentId, this.readRows(parentId, 0, -1), throughSeq);
      for (const ev of events) {
        this.st.insert.run(childId, ev.seq, ev.type, ev.time, JSON.stringify(ev.data), ev.ignorable ? 1 : 0,
          ev.sourceEventSeqs?.length ? JSON.stringify(ev.sourceEventSeqs) : null, ev.surfaceOp === undefined ? null : JSON.stringify(ev.surfaceOp));
      }
      const b = (x: boolean) => (x ? 1 : 0);
      this.st.create.run(childId, tail.nextSeq, b(tail.active), tail.lastPlanModeSeq, tail.told === null ? null : b(tail.told), b(tail.turnOpen), tail.turn,
        tail.lastStepStartSeq, tail.step, b(tail.stepOpen), Date.now(), parentId, events.length);
      this.database.prepare(`INSERT INTO session_owners (session_id, namespace, name, uid, claimed_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (session_id) DO UPDATE SET uid = excluded.uid, claimed_at = excluded.claimed_at
WHERE session_owners.namespace = excluded.namespace AND session_owners.name = excluded.name AND session_owners.uid <> excluded.uid AND excluded.uid <> ''`)
        .run(childId, owner.namespace, owner.name, owner.uid, Date.now());
      this.onAppend?.(childId, tail);
      return tail;
    });
  }

  close(): void {
    if (this.held) this.database.exec('ROLLBACK');
    this.held = false;
    this.database.close();
  }
}
