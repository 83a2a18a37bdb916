// The operator's session-log store on PostgreSQL, through pg: the schema, migration, the
// compare-and-swap append and the tail maintenance of pkg/sessionlog (postgres.go, owner.go,
// identity.go), so the manager (Go, pgx) and the harness (this package) share one database.
// An append locks the session's tail row (SELECT ... FOR UPDATE) in the transaction that
// checks the next seq, inserts the events and advances the tail: concurrent writers serialise
// on that row, and every one but the first sees the moved seq and gets a ConflictError.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { redact, redactError, secrets } from './connstr.js';
import { apply, check, ConflictError, emptyTail, ValidationError, type Facts, type LogEvent, type Tail } from './events.js';
import { checkForkOwners, forkPrefix, StoreLostError, type AppendOptions, type LogStore, type Owner, type SessionRow } from './log-store.js';

/** The schema version pkg/sessionlog writes; a newer database is refused, as the Go store does. */
export const SCHEMA_VERSION = 1;

/**
 * Bounds each connection attempt and each statement, as pkg/sessionlog's DefaultCallTimeout
 * bounds a store call: a database that accepts connections but never answers becomes an error,
 * not an agent blocked for ever. A connection whose statement timed out is not reused.
 */
export const CALL_TIMEOUT_MS = 15000;

// The advisory lock that serialises schema migration between processes ("planlog"), the key
// of postgres.go; as text, since it does not fit a JavaScript number.
const MIGRATE_LOCK = BigInt('0x706c616e6c6f67').toString();

// Byte for byte the DDL of pkg/sessionlog: data is text, not jsonb, so it reads back as written.
const MIGRATIONS: Record<number, string> = {
  1: `
CREATE TABLE IF NOT EXISTS sessions (
	session_id          text PRIMARY KEY,
	next_seq            bigint NOT NULL,
	active              boolean NOT NULL,
	last_plan_mode_seq  bigint NOT NULL,
	told                boolean,
	turn_open           boolean NOT NULL,
	turn                bigint NOT NULL,
	last_step_start_seq bigint NOT NULL,
	step                bigint NOT NULL,
	step_open           boolean NOT NULL,
	created_at          bigint NOT NULL,
	parent              text,
	seed_length         bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
	session_id        text NOT NULL,
	seq               bigint NOT NULL,
	type              text NOT NULL,
	time              bigint NOT NULL,
	data              text NOT NULL,
	ignorable         boolean NOT NULL DEFAULT false,
	source_event_seqs text,
	surface_op        text,
	PRIMARY KEY (session_id, seq)
);`,
};

const OWNER_SCHEMA = `
CREATE TABLE IF NOT EXISTS session_owners (
	session_id text PRIMARY KEY,
	namespace  text NOT NULL,
	name       text NOT NULL,
	uid        text NOT NULL,
	claimed_at bigint NOT NULL
);`;
const IDENTITY_SCHEMA = 'CREATE TABLE IF NOT EXISTS store_identity (id text NOT NULL)';
const IDENTITY_INSERT = 'INSERT INTO store_identity (id) SELECT $1::text WHERE NOT EXISTS (SELECT 1 FROM store_identity)';

// One statement, as owner.go: insert the owner when the log has none, or re-record the UID when
// the same namespace/name claims it again; any other owner stays. The row read back holds.
const CLAIM_OWNER = `INSERT INTO session_owners (session_id, namespace, name, uid, claimed_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (session_id) DO UPDATE SET uid = excluded.uid, claimed_at = excluded.claimed_at
WHERE session_owners.namespace = excluded.namespace AND session_owners.name = excluded.name AND session_owners.uid <> excluded.uid AND excluded.uid <> ''`;

const TAIL_COLS = 'next_seq, active, last_plan_mode_seq, told, turn_open, turn, last_step_start_seq, step, step_open';
const TAIL_QUERY = `SELECT ${TAIL_COLS} FROM sessions WHERE session_id = $1`;
// The tail row of a new session; a concurrent creator blocks on the primary key until the
// first commits (then this does nothing) or rolls back.
const CREATE_SESSION = `INSERT INTO sessions (session_id, ${TAIL_COLS}, created_at, parent, seed_length)
		VALUES ($1, 0, false, -1, NULL, false, 0, -1, 0, false, $2, $3, $4) ON CONFLICT (session_id) DO NOTHING`;
const UPDATE_TAIL = 'UPDATE sessions SET next_seq = $2, active = $3, last_plan_mode_seq = $4, told = $5, turn_open = $6, turn = $7, last_step_start_seq = $8, step = $9, step_open = $10 WHERE session_id = $1';
const READ_EVENTS = `SELECT seq, type, time, data, ignorable, source_event_seqs, surface_op FROM events
			WHERE session_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3`;
const EVENT_COLS = 8;
// Rows per INSERT: well under the protocol's 65535 bind parameters.
const INSERT_ROWS = 1000;

type Row = Record<string, unknown>;
const num = (v: unknown) => Number(v as string | number);
type Client = pg.PoolClient;

function scanTail(r: Row | undefined): { tail: Tail; exists: boolean } {
  if (r === undefined) return { tail: emptyTail(), exists: false };
  return {
    exists: true,
    tail: {
      nextSeq: num(r.next_seq), active: r.active === true, lastPlanModeSeq: num(r.last_plan_mode_seq),
      told: r.told === null ? null : r.told === true, turnOpen: r.turn_open === true, turn: num(r.turn),
      lastStepStartSeq: num(r.last_step_start_seq), step: num(r.step), stepOpen: r.step_open === true,
    },
  };
}

function toEvent(r: Row): LogEvent {
  const ev: LogEvent = { type: String(r.type), seq: num(r.seq), time: num(r.time), data: JSON.parse(String(r.data)) };
  if (r.ignorable === true) ev.ignorable = true;
  if (r.source_event_seqs !== null) ev.sourceEventSeqs = JSON.parse(String(r.source_event_seqs));
  if (r.surface_op !== null) ev.surfaceOp = JSON.parse(String(r.surface_op));
  return ev;
}

/**
 * url as pg should read it to mean what the manager's pgx reads: sslmode as libpq defines it
 * (require encrypts without verifying the server), where pg alone takes require for
 * verify-full.
 */
export function libpqSemantics(url: string): string {
  const u = new URL(url);
  if (u.searchParams.has('sslmode') && !u.searchParams.has('uselibpqcompat')) u.searchParams.set('uselibpqcompat', 'true');
  return u.toString();
}

/** The fix for a password whose characters break the URL (pkg/sessionlog pgconfig.go). */
const PERCENT_ENCODE_HINT = "percent-encode the password's special characters in the URL (%2F for /, %40 for @, %3A for :, %3F for ?, %23 for #, %25 for %, %20 for a space)";

/**
 * Refuses a connection string pg cannot parse, or whose password pg reads other than connstr
 * masks it, with a message that never quotes it (pkg/sessionlog parsePostgres): an error about
 * the fields pg read instead would show the rest of the password.
 */
export function checkConnectionString(url: string): void {
  const shown = redact(url);
  let password: unknown;
  try {
    password = (new pg.Client({ connectionString: libpqSemantics(url) }) as unknown as { connectionParameters: { password?: unknown } }).connectionParameters.password;
  } catch {
    throw new Error(`postgres session log ${shown}: the connection string does not parse: ${PERCENT_ENCODE_HINT}`);
  }
  const found = secrets(url);
  if (found.length > 0 && !found.includes(typeof password === 'string' ? password : '')) {
    throw new Error(`postgres session log ${shown}: the password is ambiguous: ${PERCENT_ENCODE_HINT}`);
  }
}

/**
 * The store on the PostgreSQL database url names; the schema is created or migrated first.
 * Every connection made after that checks the store's identity (as pkg/sessionlog's
 * AfterConnect does): one that reaches a database with another identity or none fails the call
 * with a StoreLostError, so nothing is written to a store that is not the one opened.
 */
export class PostgresLogStore implements LogStore {
  readonly pool: pg.Pool;
  onLost?: (e: StoreLostError) => void;
  private lostReported = false;
  /** The identity of the store that was opened, once the schema is ready. */
  private opened?: string;
  private readonly verified = new WeakSet<object>();
  onAppend?: (sessionId: string, tail: Tail) => void;
  /** The open migration; every operation waits for it (and fails with it). */
  private readonly ready: Promise<void>;
  /** The connection and session of hold()'s open transaction. */
  private held?: { client: Client; sessionId: string; createdRow: boolean };
  // Operations on the held connection run one at a time: their statements must not interleave.
  private queue: Promise<unknown> = Promise.resolve();
  // hold() calls take the lock in turn: each waits for the one before it to be released.
  private holds: Promise<void> = Promise.resolve();
  private pendingHolds = 0;
  // The harness writes behind, so an append of its own may be under way when the protocol
  // takes the lock, and the protocol releases the lock only once that append is stored: the
  // append must never wait on this process's lock. hold() lets the appends outside a hold
  // finish before it takes the lock, and an append issued while a hold is being taken joins it.
  private readonly unheld = new Map<string, Set<Promise<unknown>>>();
  private readonly taking: { sessionId: string; taken: Promise<void> }[] = [];

  constructor(private readonly url: string, opts: { max?: number; callTimeoutMs?: number } = {}) {
    checkConnectionString(url);
    let connectionString = url;
    try { connectionString = libpqSemantics(url); } catch { /* pg reports the malformed URL on first use */ }
    const timeout = opts.callTimeoutMs ?? CALL_TIMEOUT_MS;
    // Idle connections do not keep the harness's process alive once it is done.
    this.pool = new pg.Pool({ connectionString, max: opts.max ?? 4, connectionTimeoutMillis: timeout, query_timeout: timeout, allowExitOnIdle: true });
    // An idle connection the server drops must not end the process; the next query reconnects.
    this.pool.on('error', () => undefined);
    this.ready = this.migrate().then(async () => {
      this.opened = String((await this.pool.query('SELECT id FROM store_identity')).rows[0]?.id);
    }).catch((e: Error) => {
      throw new Error(`open postgres session log ${redact(url)}: ${redactError(e.message, url)}`);
    });
    // A store nobody uses must not report an unhandled rejection; users see it on first use.
    this.ready.catch(() => undefined);
  }

  /** Resolves once the schema is ready, or rejects naming the store (its password masked). */
  async open(): Promise<this> { await this.ready; return this; }

  get holding(): boolean { return this.held !== undefined || this.pendingHolds > 0; }

  private async migrate(): Promise<void> {
    await this.inTx(async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1::bigint)', [MIGRATE_LOCK]);
      await c.query('CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)');
      const v = (await c.query('SELECT max(version) AS v FROM schema_version')).rows[0]?.v;
      const cur = v === null || v === undefined ? 0 : num(v);
      if (cur > SCHEMA_VERSION) throw new Error(`schema version ${cur} is newer than this plugin supports (${SCHEMA_VERSION}); upgrade the plugin`);
      for (let n = cur + 1; n <= SCHEMA_VERSION; n++) await c.query(MIGRATIONS[n]!);
      await c.query(OWNER_SCHEMA);
      await c.query(IDENTITY_SCHEMA);
      await c.query(IDENTITY_INSERT, [randomBytes(16).toString('hex')]);
      if (cur < SCHEMA_VERSION) {
        await c.query('DELETE FROM schema_version');
        await c.query('INSERT INTO schema_version (version) VALUES ($1)', [SCHEMA_VERSION]);
      }
    });
  }

  /** A pool connection, its store identity checked once it is new (after the open). */
  private async connect(): Promise<Client> {
    const c = await this.pool.connect();
    if (this.opened === undefined || this.verified.has(c)) return c;
    let found = '';
    try {
      found = String((await c.query('SELECT id FROM store_identity')).rows[0]?.id ?? '');
    } catch (e) {
      c.release(true);
      if ((e as { code?: string }).code === '42P01') throw this.lost(new StoreLostError(redact(this.url), this.opened, '', 'the database holds no session log (it was dropped and created again, or is another database)'));
      throw e;
    }
    if (found !== this.opened) {
      c.release(true);
      throw this.lost(new StoreLostError(redact(this.url), this.opened, found, found === '' ? 'the database holds no store identity' : undefined));
    }
    this.verified.add(c);
    return c;
  }

  private lost(e: StoreLostError): StoreLostError {
    if (!this.lostReported) {
      this.lostReported = true;
      this.onLost?.(e);
    }
    return e;
  }

  /** One statement on a checked connection. */
  private async query(sql: string, params: unknown[] = []): Promise<pg.QueryResult> {
    const c = await this.connect();
    let broken: Error | undefined;
    try {
      return await c.query(sql, params);
    } catch (e) {
      broken = e as Error;
      throw e;
    } finally {
      c.release(broken);
    }
  }

  /** fn in a transaction on a pool connection; a connection left in doubt is not reused. */
  private async inTx<T>(fn: (c: Client) => Promise<T>, begin = 'BEGIN'): Promise<T> {
    const c = await this.connect();
    let broken: Error | undefined;
    try {
      await c.query(begin);
      try {
        const out = await fn(c);
        await c.query('COMMIT');
        return out;
      } catch (e) {
        await c.query('ROLLBACK').catch((re: Error) => { broken = re; });
        throw e;
      }
    } finally {
      c.release(broken);
    }
  }

  // Runs fn on the held connection after the operations queued before it.
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const out = this.queue.then(fn);
    this.queue = out.catch(() => undefined);
    return out;
  }

  private takingFor(sessionId: string) {
    return this.held === undefined || this.held.sessionId !== sessionId ? this.taking.find((t) => t.sessionId === sessionId) : undefined;
  }

  private heldFor(sessionId: string) {
    return this.held !== undefined && this.held.sessionId === sessionId ? this.held : undefined;
  }

  /**
   * Takes the lock of sessionId's tail row until release: this process's appends to it join
   * that transaction, the manager's wait on the row. A session with no row yet gets one, so a
   * concurrent creator waits too; it is removed again if release comes before any append.
   */
  async hold(sessionId: string): Promise<() => Promise<void>> {
    const before = this.holds;
    let released!: () => void;
    this.holds = new Promise((resolve) => { released = resolve; });
    this.pendingHolds++;
    let taken!: () => void;
    const taking = { sessionId, taken: new Promise<void>((resolve) => { taken = resolve; }) };
    this.taking.push(taking);
    let client: Client | undefined;
    try {
      await before;
      await this.ready;
      await Promise.allSettled(this.unheld.get(sessionId) ?? []);
      client = await this.connect();
      await client.query('BEGIN');
      const r = await client.query(CREATE_SESSION, [sessionId, Date.now(), null, 0]);
      await client.query(`${TAIL_QUERY} FOR UPDATE`, [sessionId]);
      this.held = { client, sessionId, createdRow: r.rowCount === 1 };
    } catch (e) {
      if (client) {
        await client.query('ROLLBACK').catch(() => undefined);
        client.release(true);
      }
      released();
      throw e;
    } finally {
      this.pendingHolds--;
      this.taking.splice(this.taking.indexOf(taking), 1);
      taken();
    }
    const h = this.held;
    const c = client;
    // The store stops routing to this transaction at once; its commit waits for the
    // operations already queued on it.
    return () => {
      if (this.held !== h) return Promise.resolve();
      this.held = undefined;
      return this.serial(async () => {
        let broken: Error | undefined;
        try {
          if (h.createdRow) await c.query('DELETE FROM sessions WHERE session_id = $1 AND next_seq = 0', [sessionId]);
          await c.query('COMMIT');
        } catch (e) {
          broken = e as Error;
          await c.query('ROLLBACK').catch(() => undefined);
          throw e;
        } finally {
          c.release(broken);
          released();
        }
      });
    };
  }

  async tail(sessionId: string): Promise<Tail> {
    await this.ready;
    const h = this.heldFor(sessionId);
    if (h) return this.serial(async () => scanTail((await h.client.query(TAIL_QUERY, [sessionId])).rows[0]).tail);
    return scanTail((await this.query(TAIL_QUERY, [sessionId])).rows[0]).tail;
  }

  /**
   * Appends a contiguous batch with compare-and-swap: stored only if its first seq is the
   * stored next seq, else a ConflictError and nothing written. Returns the new tail.
   */
  async append(sessionId: string, events: readonly LogEvent[], opts: AppendOptions = {}): Promise<Tail> {
    if (sessionId === '') throw new Error('session id is empty');
    const now = Date.now();
    const batch: { ev: LogEvent; f: Facts; data: string }[] = [];
    for (const [i, ev0] of events.entries()) {
      const ev = { ...ev0, time: ev0.time === 0 || ev0.time === undefined ? now : ev0.time };
      if (i > 0 && ev.seq !== events[0]!.seq + i) {
        throw new ValidationError(sessionId, ev.seq, ev.type, 'seq', `seq ${ev.seq} does not continue the batch (expected ${events[0]!.seq + i}); seqs must be contiguous`);
      }
      batch.push({ ev, f: check(sessionId, ev), data: JSON.stringify(ev.data) });
    }
    await this.ready;
    if (batch.length === 0) return this.tail(sessionId);
    for (let t = this.takingFor(sessionId); t !== undefined; t = this.takingFor(sessionId)) await t.taken;
    const h = this.heldFor(sessionId);
    let tail: Tail;
    if (h) {
      // Inside the held transaction: a savepoint undoes a refused batch and keeps the lock.
      tail = await this.serial(async () => {
        await h.client.query('SAVEPOINT planmode_append');
        try {
          const t = await this.write(h.client, sessionId, batch, opts, now, h.createdRow);
          await h.client.query('RELEASE SAVEPOINT planmode_append');
          if (t !== undefined) h.createdRow = false;
          return t ?? (await this.tailOn(h.client, sessionId));
        } catch (e) {
          await h.client.query('ROLLBACK TO SAVEPOINT planmode_append');
          throw e;
        }
      });
    } else {
      const write = this.inTx(async (c) => (await this.write(c, sessionId, batch, opts, now, false)) ?? (await this.tailOn(c, sessionId)));
      const set = this.unheld.get(sessionId) ?? new Set();
      this.unheld.set(sessionId, set.add(write));
      try {
        tail = await write;
      } finally {
        set.delete(write);
        if (set.size === 0) this.unheld.delete(sessionId);
      }
    }
    this.onAppend?.(sessionId, tail);
    return tail;
  }

  private async tailOn(c: Client, sessionId: string): Promise<Tail> {
    return scanTail((await c.query(TAIL_QUERY, [sessionId])).rows[0]).tail;
  }

  // The append's statements, in a transaction c has open: the new tail, or undefined when the
  // whole batch was adopted as already stored. setHeader: the row exists but hold() made it,
  // so the header is this batch's.
  private async write(c: Client, sessionId: string, batch: { ev: LogEvent; f: Facts; data: string }[], opts: AppendOptions, now: number, setHeader: boolean): Promise<Tail | undefined> {
    const hd = opts.header ?? {};
    await c.query(CREATE_SESSION, [sessionId, hd.createdAt ?? now, hd.parentSession ?? null, hd.seedLength ?? 0]);
    const { tail, exists } = scanTail((await c.query(`${TAIL_QUERY} FOR UPDATE`, [sessionId])).rows[0]);
    if (!exists) throw new Error(`append to session "${sessionId}": tail row vanished`);
    let rest = batch;
    if (opts.adoptStoredPlanMode && rest[0]!.ev.seq < tail.nextSeq) {
      const first = rest[0]!.ev.seq;
      const stored = (await c.query(READ_EVENTS, [sessionId, Math.max(0, first), tail.nextSeq - first])).rows.map(toEvent);
      let k = 0;
      while (k < rest.length && k < stored.length && rest[k]!.ev.type === 'plan/mode' && stored[k]!.type === 'plan/mode'
        && JSON.stringify(stored[k]!.data) === rest[k]!.data) k++;
      if (k > 0 && (k === rest.length || rest[k]!.ev.seq === tail.nextSeq)) rest = rest.slice(k);
    }
    if (rest.length === 0) return undefined;
    const first = rest[0]!.ev.seq;
    if (first !== tail.nextSeq) throw new ConflictError(sessionId, tail.nextSeq, first);
    for (let i = 0; i < rest.length; i += INSERT_ROWS) {
      const part = rest.slice(i, i + INSERT_ROWS);
      const params: unknown[] = [];
      const values = part.map(({ ev, data }, j) => {
        params.push(sessionId, ev.seq, ev.type, ev.time, data, ev.ignorable === true,
          ev.sourceEventSeqs?.length ? JSON.stringify(ev.sourceEventSeqs) : null,
          ev.surfaceOp === undefined ? null : JSON.stringify(ev.surfaceOp));
        return `(${Array.from({ length: EVENT_COLS }, (_, k) => `$${j * EVENT_COLS + k + 1}`).join(', ')})`;
      });
      await c.query(`INSERT INTO events (session_id, seq, type, time, data, ignorable, source_event_seqs, surface_op) VALUES ${values.join(', ')}`, params);
    }
    for (const { ev, f } of rest) apply(tail, ev, f);
    if (setHeader) {
      await c.query('UPDATE sessions SET created_at = $2, parent = $3, seed_length = $4 WHERE session_id = $1',
        [sessionId, hd.createdAt ?? now, hd.parentSession ?? null, hd.seedLength ?? 0]);
    }
    await c.query(UPDATE_TAIL, [sessionId, tail.nextSeq, tail.active, tail.lastPlanModeSeq, tail.told, tail.turnOpen, tail.turn, tail.lastStepStartSeq, tail.step, tail.stepOpen]);
    return tail;
  }

  /** The events with seq >= fromSeq (all of them when limit <= 0), checked contiguous. */
  async readFrom(sessionId: string, fromSeq: number, limit = 0): Promise<LogEvent[]> {
    await this.ready;
    const read = async (c: Client) => {
      const { tail } = scanTail((await c.query(TAIL_QUERY, [sessionId])).rows[0]);
      const out = (await c.query(READ_EVENTS, [sessionId, Math.max(0, fromSeq), limit > 0 ? limit : null])).rows.map(toEvent);
      let want = Math.max(0, fromSeq);
      for (const ev of out) {
        if (ev.seq !== want) throw new Error(`session "${sessionId}" is corrupt: seq ${want} is missing`);
        want++;
      }
      if (!(limit > 0 && out.length === limit) && want < tail.nextSeq) throw new Error(`session "${sessionId}" is corrupt: seq ${want} is missing`);
      return out;
    };
    const h = this.heldFor(sessionId);
    if (h) return this.serial(() => read(h.client));
    // One snapshot, so the rows and the next seq they are checked against agree.
    return this.inTx(read, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  }

  async info(sessionId: string): Promise<SessionRow | undefined> {
    await this.ready;
    const q = 'SELECT created_at, parent, seed_length FROM sessions WHERE session_id = $1';
    const h = this.heldFor(sessionId);
    // A row hold() made and no append has filled is no session yet.
    if (h?.createdRow) return undefined;
    const r = (h ? await this.serial(() => h.client.query(q, [sessionId])) : await this.query(q, [sessionId])).rows[0] as Row | undefined;
    if (r === undefined) return undefined;
    return { id: sessionId, createdAt: num(r.created_at), seedLength: num(r.seed_length), ...(r.parent !== null ? { parentSession: String(r.parent) } : {}) };
  }

  async list(): Promise<SessionRow[]> {
    await this.ready;
    const rows = (await this.query('SELECT session_id, created_at, parent, seed_length FROM sessions ORDER BY session_id')).rows as Row[];
    return rows.map((r) => ({
      id: String(r.session_id), createdAt: num(r.created_at), seedLength: num(r.seed_length), ...(r.parent !== null ? { parentSession: String(r.parent) } : {}),
    }));
  }

  async identity(): Promise<string> {
    await this.ready;
    return String((await this.query('SELECT id FROM store_identity')).rows[0]?.id);
  }

  async claimOwner(sessionId: string, owner: Owner): Promise<Owner> {
    if (sessionId === '' || owner.namespace === '' || owner.name === '' || owner.uid === '') {
      throw new Error(`claim session "${sessionId}" for ${owner.namespace}/${owner.name} (uid "${owner.uid}"): session ID, namespace, name and uid are all required`);
    }
    await this.ready;
    return this.inTx(async (c) => {
      await c.query(CLAIM_OWNER, [sessionId, owner.namespace, owner.name, owner.uid, Date.now()]);
      // The insert took the row's lock (or waited for a concurrent claim), so this row holds.
      const r = (await c.query('SELECT namespace, name, uid FROM session_owners WHERE session_id = $1', [sessionId])).rows[0] as Row;
      return { namespace: String(r.namespace), name: String(r.name), uid: String(r.uid) };
    });
  }

  async fork(parentId: string, childId: string, throughSeq: number, owner: Owner): Promise<Tail> {
    if (parentId === '' || childId === '' || parentId === childId) throw new Error(`fork "${parentId}" -> "${childId}": session ids must be non-empty and differ`);
    await this.ready;
    const tail = await this.inTx(async (c) => {
      if ((await c.query('SELECT 1 FROM sessions WHERE session_id = $1', [parentId])).rowCount === 0) throw new Error(`fork "${parentId}": session "${parentId}" not found`);
      // The claim takes the child's owner row lock; the parent's owner is read with a share
      // lock, so a release waits for the fork (pkg/sessionlog owner.go).
      await c.query(CLAIM_OWNER, [childId, owner.namespace, owner.name, owner.uid, Date.now()]);
      const ownerRow = async (id: string, lock: string) => {
        const r = (await c.query(`SELECT namespace, name, uid FROM session_owners WHERE session_id = $1 ${lock}`, [id])).rows[0] as Row | undefined;
        return r === undefined ? undefined : { namespace: String(r.namespace), name: String(r.name), uid: String(r.uid) };
      };
      checkForkOwners(parentId, childId, owner, await ownerRow(parentId, 'FOR SHARE'), await ownerRow(childId, 'FOR UPDATE'));
      const created = await c.query(CREATE_SESSION, [childId, Date.now(), parentId, 0]);
      if (created.rowCount !== 1) {
        const { tail: t } = scanTail((await c.query(TAIL_QUERY, [childId])).rows[0]);
        throw new ConflictError(childId, t.nextSeq, 0);
      }
      const { events, tail: t } = forkPrefix(parentId, (await c.query(READ_EVENTS, [parentId, 0, null])).rows.map(toEvent), throughSeq);
      for (let i = 0; i < events.length; i += INSERT_ROWS) {
        const part = events.slice(i, i + INSERT_ROWS);
        const params: unknown[] = [];
        const values = part.map((ev, j) => {
          params.push(childId, ev.seq, ev.type, ev.time, JSON.stringify(ev.data), ev.ignorable === true,
            ev.sourceEventSeqs?.length ? JSON.stringify(ev.sourceEventSeqs) : null, ev.surfaceOp === undefined ? null : JSON.stringify(ev.surfaceOp));
          return `(${Array.from({ length: EVENT_COLS }, (_, k) => `$${j * EVENT_COLS + k + 1}`).join(', ')})`;
        });
        await c.query(`INSERT INTO events (session_id, seq, type, time, data, ignorable, source_event_seqs, surface_op) VALUES ${values.join(', ')}`, params);
      }
      await c.query('UPDATE sessions SET seed_length = $2 WHERE session_id = $1', [childId, events.length]);
      await c.query(UPDATE_TAIL, [childId, t.nextSeq, t.active, t.lastPlanModeSeq, t.told, t.turnOpen, t.turn, t.lastStepStartSeq, t.step, t.stepOpen]);
      return t;
    });
    this.onAppend?.(childId, tail);
    return tail;
  }

  async close(): Promise<void> {
    const h = this.held;
    this.held = undefined;
    if (h) {
      await h.client.query('ROLLBACK').catch(() => undefined);
      h.client.release();
    }
    await this.pool.end();
  }

  toString(): string { return `postgres session log ${redact(this.url)}`; }
}
