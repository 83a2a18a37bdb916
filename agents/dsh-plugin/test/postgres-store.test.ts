// The PostgreSQL store's behaviours the plugin relies on, beside the golden vectors: adopting a
// mirrored plan/mode, the write lock against another connection (the manager's), the owner
// claim, the store identity, the schema version check, and no password in any message.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { redact, redactError, secrets } from '../src/connstr.js';
import { ConflictError, type LogEvent } from '../src/events.js';
import { libpqSemantics, PostgresLogStore } from '../src/postgres-store.js';
import { OwnershipError, StoreLostError } from '../src/log-store.js';
import { startPostgres, type PgServer } from './pg-server.js';

const ev = (type: string, seq: number, data: unknown): LogEvent => ({ type, seq, time: 1, data });
const turn = (n: number, seq: number): LogEvent[] => [ev('turn/start', seq, { turn: n }), ev('turn/end', seq + 1, { turn: n, reason: { kind: 'completed' } })];

describe('connection strings: pkg/connstr\'s rule', () => {
  test('redact masks every password form where it stands and keeps the rest', () => {
    for (const [input, want] of Object.entries({
      'postgres://planmode:s3cret@db:5432/log?sslmode=require': 'postgres://planmode:xxxxx@db:5432/log?sslmode=require',
      'postgres://planmode@db/log?password=s3cret&sslmode=disable': 'postgres://planmode@db/log?password=xxxxx&sslmode=disable',
      'postgresql://planmode@db/log?sslmode=verify-full&sslpassword=s3cret': 'postgresql://planmode@db/log?sslmode=verify-full&sslpassword=xxxxx',
      'postgres://planmode@db/log?PASSWORD=s3cret': 'postgres://planmode@db/log?PASSWORD=xxxxx',
      'postgres://planmode@db/log?pass%77ord=s3cret': 'postgres://planmode@db/log?pass%77ord=xxxxx',
      'host=db user=planmode password=s3cret dbname=log': 'host=db user=planmode password=xxxxx dbname=log',
      "host=db password = 's3 cret\\' x' dbname=log": 'host=db password = xxxxx dbname=log',
      'host=db password=s3\\ cret dbname=log': 'host=db password=xxxxx dbname=log',
      "host=db password='s3 cret": 'host=db password=xxxxx',
      'sqlite:///var/lib/planmode/log.db': 'sqlite:///var/lib/planmode/log.db',
      'postgres://u:s3cret@[::1:bad': 'postgres://u:xxxxx@[::1:bad',
      'postgres://u:s3/cret@db/log': 'postgres://u:xxxxx@db/log',
      'postgres://u:s3 cret@db/log': 'postgres://u:xxxxx@db/log',
      'postgres://u:s3@cr@et@db/log': 'postgres://u:xxxxx@db/log',
      'postgres://u:s3?c#ret@db/log': 'postgres://u:xxxxx@db/log',
      'postgres://u:s3cret@h1:5432,h2/log': 'postgres://u:xxxxx@h1:5432,h2/log',
      'host=h1,h2 port=5432,5433 password=s3cret': 'host=h1,h2 port=5432,5433 password=xxxxx',
      'host=db password=s3://cr@et': 'host=db password=xxxxx',
    })) {
      assert.equal(redact(input), want, input);
    }
  });
  test('a password that occurs in other words is masked where it stands; the words stay', () => {
    for (const [conn, msg, want] of [
      ['postgres://postgres:postgres@db:5432/postgres', 'open postgres session log postgres://postgres:postgres@db:5432/postgres: dial tcp 10.0.0.1:5432: connect: connection refused',
        'open postgres session log postgres://postgres:xxxxx@db:5432/postgres: dial tcp 10.0.0.1:5432: connect: connection refused'],
      ['postgres://u:p@db/log', 'dial tcp db:5432 for postgres://u:p@db/log: timeout', 'dial tcp db:5432 for postgres://u:xxxxx@db/log: timeout'],
      ['host=db user=planmode password=planmode', 'failed to connect to `user=planmode database=planmode`: host=db user=planmode password=planmode',
        'failed to connect to `user=planmode database=planmode`: host=db user=planmode password=xxxxx'],
    ] as const) {
      assert.equal(redactError(msg, conn), want, conn);
    }
  });
  test('secrets are what a client reads', () => {
    assert.deepEqual(secrets('postgres://u:s3%2Fc%20ret@db/log'), ['s3/c ret']);
    assert.deepEqual(secrets("host=db password='it\\'s' sslpassword=a\\ b"), ["it's", 'a b']);
    assert.deepEqual(secrets('postgres://u@db/log'), []);
  });
  // The property test of pkg/connstr's fuzz targets, over the same forms (pkg/connstr/connstrtest):
  // whatever the password, no part of it shows in the redacted string, in a message quoting it,
  // or in the store's refusal to open it.
  test('property: no part of any password shows, for every form', () => {
    const head = 'Kq7';
    const tail = '7Jx';
    const forms: [string, (pw: string) => string][] = [
      ['url-raw', (pw) => `postgres://planmode:${pw}@127.0.0.1:1/log?sslmode=disable`],
      ['url-escaped', (pw) => `postgres://planmode:${encodeURIComponent(pw)}@127.0.0.1:1/log?sslmode=disable`],
      ['url-query', (pw) => `postgres://planmode@127.0.0.1:1/log?sslmode=disable&password=${encodeURIComponent(pw)}`],
      ['url-multihost', (pw) => `postgres://planmode:${pw}@127.0.0.1:1,127.0.0.1:2/log?sslmode=disable`],
      ['kv-quoted', (pw) => `host=127.0.0.1 port=1 user=planmode password='${pw.replace(/[\\']/g, (c) => '\\' + c)}' dbname=log sslmode=disable`],
      ['kv-bare', (pw) => `host=127.0.0.1,127.0.0.2 port=1,1 user=planmode password=${pw.replace(/[ \t\n\r\v\f'\\]/g, (c) => '\\' + c)} dbname=log sslmode=disable`],
    ];
    const alphabet = 'ab09 /@:?#&=%\'"\\,.+-_[]';
    let seed = 0x2545f491;
    const rand = (n: number) => { seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5; return (seed >>> 0) % n; };
    const cores = ['s3cret', 'p@ss', 'a/b c', 'x?y#z', 'q\'u\\o"te', '%zz%41', 'a&password=b', ' lead', 'u:v@w', '\\', 'postgres', 'p', 'dial tcp'];
    for (let i = 0; i < 400; i++) cores.push(Array.from({ length: 1 + rand(12) }, () => alphabet[rand(alphabet.length)]).join(''));
    for (const core of cores) {
      const pw = head + core + tail;
      for (const [name, build] of forms) {
        const conn = build(pw);
        const outs = [redact(conn), redactError(`open ${conn}: dial tcp 127.0.0.1:1: refused`, conn)];
        try { new PostgresLogStore(conn).close().catch(() => undefined); } catch (e) { outs.push((e as Error).message); }
        for (const out of outs) assert.ok(!out.includes(head) && !out.includes(tail), `form ${name}, password ${JSON.stringify(pw)}: ${out}`);
      }
    }
  });
});

test('sslmode means what it means to the manager (libpq): require encrypts without verifying', () => {
  // What pg's client makes of the URL (its connection parameters), without connecting.
  const cfg = (url: string) => (new pg.Client({ connectionString: libpqSemantics(url) }) as unknown as { connectionParameters: { ssl: unknown } }).connectionParameters;
  assert.deepEqual(cfg('postgres://u:p@db/log?sslmode=require').ssl, { rejectUnauthorized: false });
  assert.equal(cfg('postgres://u:p@db/log?sslmode=disable').ssl, false);
  assert.deepEqual(cfg('postgres://u:p@db/log?sslmode=verify-full').ssl, {});
  assert.equal(libpqSemantics('postgres://u:p@db/log'), 'postgres://u:p@db/log', 'no sslmode: the URL as given');
});

describe('PostgreSQL store', () => {
  let server: PgServer;
  const opened: PostgresLogStore[] = [];
  const open = async () => { const s = await new PostgresLogStore(server.url).open(); opened.push(s); return s; };
  before(async () => { server = await startPostgres(); });
  after(async () => {
    for (const s of opened) await s.close().catch(() => undefined);
    await server?.stop();
  });

  test('a mirrored plan/mode the manager stored is taken as written, once', async () => {
    const s = await open();
    await s.append('adopt', [ev('turn/start', 0, { turn: 1 }), ev('step/start', 1, { turn: 1, step: 1 }), ev('step/end', 2, { turn: 1, step: 1 })]);
    await s.append('adopt', [{ ...ev('plan/mode', 3, { active: true }), time: 5 }]); // the manager's
    const t = await s.append('adopt', [{ ...ev('plan/mode', 3, { active: true }), time: 6 }, ev('step/start', 4, { turn: 1, step: 2 })], { adoptStoredPlanMode: true });
    assert.equal(t.nextSeq, 5);
    assert.deepEqual((await s.readFrom('adopt', 0)).map((e) => e.type), ['turn/start', 'step/start', 'step/end', 'plan/mode', 'step/start']);
    assert.equal((await s.readFrom('adopt', 3))[0]!.time, 5, 'the stored event is the manager\'s');
    await assert.rejects(s.append('adopt', [ev('plan/mode', 3, { active: false })], { adoptStoredPlanMode: true }), ConflictError);
    await assert.rejects(s.append('adopt', [ev('plan/mode', 3, { active: true })]), ConflictError);
  });

  test('the write lock makes another connection wait until it is released, then conflict', async () => {
    const agent = await open(), manager = await open();
    await agent.append('lock', turn(1, 0));
    const release = await agent.hold('lock');
    assert.equal(agent.holding, true);
    let managerDone = false;
    const managerAppend = manager.append('lock', [ev('plan/mode', 2, { active: true })]).finally(() => { managerDone = true; });
    managerAppend.catch(() => undefined);
    // The manager's append is blocked on the row lock: prove it on the server, not by a delay.
    const probe = new pg.Client({ connectionString: server.url });
    await probe.connect();
    try {
      for (;;) {
        const r = await probe.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'");
        if (r.rows[0].n > 0) break;
        assert.equal(managerDone, false, 'the manager appended while the agent held the lock');
        await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      await probe.end();
    }
    assert.equal(managerDone, false);
    await agent.append('lock', [ev('turn/start', 2, { turn: 2 })]);
    assert.equal((await agent.tail('lock')).turnOpen, true, 'the held transaction sees its own append');
    await release();
    assert.equal(agent.holding, false);
    await assert.rejects(managerAppend, (e: unknown) => e instanceof ConflictError && e.expected === 3 && e.got === 2, 'the manager finds the turn started');
    assert.equal((await manager.tail('lock')).turnOpen, true);
  });

  test('a hold on a new session leaves no row when nothing was appended; the first append under it sets the header', async () => {
    const agent = await open(), other = await open();
    const release = await agent.hold('fresh');
    assert.equal(await agent.info('fresh'), undefined, 'a row only the lock made is no session');
    await release();
    assert.equal(await other.info('fresh'), undefined);
    const r2 = await agent.hold('fresh');
    await agent.append('fresh', turn(1, 0), { header: { createdAt: 1234, parentSession: 'p', seedLength: 7 } });
    await r2();
    assert.deepEqual(await other.info('fresh'), { id: 'fresh', createdAt: 1234, parentSession: 'p', seedLength: 7 });
    assert.equal((await other.tail('fresh')).nextSeq, 2);
  });

  test('holds in one process take turns', async () => {
    const s = await open();
    await s.append('turns', turn(1, 0));
    const r1 = await s.hold('turns');
    const second = s.hold('turns');
    await r1();
    const r2 = await second;
    assert.equal(s.holding, true);
    await r2();
  });

  // The harness writes behind: its background append may be under way when the protocol takes
  // the lock, or start while the lock is being taken, and the protocol releases the lock only
  // once that append is stored (a flush). Such an append must never wait on this process's own
  // lock, or the two wait on each other until the statement timeout fails the append.
  test('an append under way when hold() is called, or issued while it waits, does not wait on that hold', async () => {
    const s = await new PostgresLogStore(server.url, { callTimeoutMs: 3000 }).open();
    opened.push(s);
    let seq = 0;
    const next = () => { const b = turn(seq / 2 + 1, seq); seq += 2; return b; };
    for (let i = 0; i < 25; i++) {
      const before = s.append('inflight', next());
      const held = s.hold('inflight');
      await before;
      const during = s.append('inflight', next());
      await during;
      const release = await held;
      await s.append('inflight', next());
      await release();
    }
    assert.equal((await s.tail('inflight')).nextSeq, seq);
    assert.equal(s.holding, false);
  });

  test('the owner claim: first claims, same name re-claims with a new uid, another is refused', async () => {
    const s = await open();
    assert.deepEqual(await s.claimOwner('own', { namespace: 'a', name: 'x', uid: '1' }), { namespace: 'a', name: 'x', uid: '1' });
    assert.deepEqual(await s.claimOwner('own', { namespace: 'a', name: 'x', uid: '2' }), { namespace: 'a', name: 'x', uid: '2' });
    assert.deepEqual(await s.claimOwner('own', { namespace: 'b', name: 'y', uid: '3' }), { namespace: 'a', name: 'x', uid: '2' });
    await assert.rejects(s.claimOwner('own', { namespace: '', name: 'y', uid: '3' }), /session ID, namespace, name and uid are all required/);
  });

  test('a fork is for an AgentSession of the parent log\'s namespace, decided in the store\'s transaction', async () => {
    const s = await open();
    await s.append('fp', turn(1, 0));
    const child = { namespace: 'team-a', name: 'child', uid: 'u-c' };
    await assert.rejects(s.fork('fp', 'fc0', -1, child), (e: Error) => e instanceof OwnershipError && e.refusal === 'ParentUnowned');
    await s.claimOwner('fp', { namespace: 'team-a', name: 'parent', uid: 'u-p' });
    await assert.rejects(s.fork('fp', 'fc1', -1, { namespace: 'team-b', name: 'thief', uid: 'u-t' }),
      (e: Error) => e instanceof OwnershipError && e.refusal === 'ParentOfAnotherNamespace');
    assert.equal(await s.info('fc1'), undefined, 'nothing of the parent was copied');
    assert.deepEqual(await s.claimOwner('fc1', { namespace: 'team-b', name: 'later', uid: 'u' }), { namespace: 'team-b', name: 'later', uid: 'u' }, 'the refused fork recorded no owner');
    const t = await s.fork('fp', 'fc', -1, child);
    assert.equal(t.nextSeq, 2);
    assert.deepEqual(await s.readFrom('fc', 0), await s.readFrom('fp', 0));
    assert.equal((await s.info('fc'))?.parentSession, 'fp');
    assert.equal((await s.info('fc'))?.seedLength, 2);
    assert.deepEqual(await s.claimOwner('fc', { namespace: 'team-b', name: 'x', uid: 'u' }), child);
    await assert.rejects(s.fork('fp', 'fc', -1, child), ConflictError);
  });

  test('a database dropped and created again is refused on every new connection (StoreLostError); no schema is created there', async () => {
    const c = new pg.Client({ connectionString: server.url });
    await c.connect();
    try { await c.query('CREATE DATABASE lost'); } finally { await c.end(); }
    const url = server.url.replace('/postgres?', '/lost?');
    const s = await new PostgresLogStore(url).open();
    await s.append('l', turn(1, 0));
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    try {
      await admin.query('DROP DATABASE lost WITH (FORCE)');
      await admin.query('CREATE DATABASE lost');
    } finally { await admin.end(); }
    await assert.rejects(s.tail('l'), (e: Error) => e instanceof StoreLostError && /holds no session log/.test(e.message));
    const check = new pg.Client({ connectionString: url });
    await check.connect();
    try {
      assert.equal((await check.query(`SELECT to_regclass('sessions') AS t`)).rows[0].t, null, 'the store created no schema in the new database');
    } finally { await check.end(); }
    await s.close();
  });

  test('one identity per database, kept across opens', async () => {
    const a = await open(), b = await open();
    const id = await a.identity();
    assert.match(id, /^[0-9a-f]{32}$/);
    assert.equal(await b.identity(), id);
  });

  test('a newer schema version is refused naming the fix', async () => {
    const c = new pg.Client({ connectionString: server.url });
    await c.connect();
    try {
      await c.query('CREATE DATABASE newer');
    } finally {
      await c.end();
    }
    const url = server.url.replace('/postgres?', '/newer?');
    const first = await new PostgresLogStore(url).open();
    await first.pool.query('INSERT INTO schema_version (version) VALUES (99)');
    await first.close();
    const s = new PostgresLogStore(url);
    await assert.rejects(s.open(), /schema version 99 is newer than this plugin supports \(1\); upgrade the plugin/);
    await s.close();
  });

  test('a hung database is an error within the call timeout, and the store works once it answers again', { timeout: 20000 }, async () => {
    const s = await new PostgresLogStore(server.url, { callTimeoutMs: 500 }).open();
    opened.push(s);
    await s.append('hung', turn(1, 0));
    server.pause();
    try {
      const started = Date.now();
      await assert.rejects(s.append('hung', turn(2, 2)), /timeout/i);
      assert.ok(Date.now() - started < 5000, `the append failed after ${Date.now() - started} ms`);
    } finally {
      server.resume();
    }
    // Nothing of the failed append is stored, and the next one goes through.
    assert.equal((await s.tail('hung')).nextSeq, 2);
    assert.equal((await s.append('hung', turn(2, 2))).nextSeq, 4);
  });

  test('an open store does not keep a finished process alive', { timeout: 20000 }, async () => {
    const script = `import { PostgresLogStore } from ${JSON.stringify(new URL('../src/postgres-store.js', import.meta.url).href)};
const s = await new PostgresLogStore(process.argv[1]).open();
await s.append('exit', [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }]);
console.log('appended');`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, server.url], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => { out += b.toString(); });
    const started = Date.now();
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 0);
    assert.match(out, /appended/);
    // pg's idle connections would otherwise hold the event loop for their idle timeout (10 s).
    assert.ok(Date.now() - started < 8000, `the process took ${Date.now() - started} ms to exit`);
  });

  test('a store that cannot be opened is named with its password masked', async () => {
    const port = new URL(server.url).port;
    const url = `postgres://postgres:s3cret@127.0.0.1:${port}/missing_db?sslmode=disable`;
    const s = new PostgresLogStore(url);
    await assert.rejects(s.open(), (e: Error) => e.message.startsWith('open postgres session log postgres://postgres:xxxxx@127.0.0.1')
      && /missing_db/.test(e.message) && !e.message.includes('s3cret'));
    await s.close();
  });
});
