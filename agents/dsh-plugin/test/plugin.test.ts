// Unit tests of the plugin's decisions (docs/protocol.md 5.1, 5.3, 10), its settings, the
// store behaviours the plugin relies on (adopting a mirrored plan/mode, the write lock), and
// when a step boundary is reported.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig, sqlitePathOf, type PluginConfig } from '../src/config.js';
import { ConflictError, emptyTail, type Tail } from '../src/events.js';
import type { AgentSession, SessionWatch } from '../src/kube.js';
import { mustAsk, owedNotice, pendingMessages } from '../src/decide.js';
import { NoticeDefault as NOTICE_OFF, NoticePlanOn as NOTICE_ON } from '../src/texts.js';
import { SqliteLogStore } from '../src/sqlite-store.js';
import { OwnershipError, StoreLostError, type LogStore } from '../src/log-store.js';
import { boundary } from '../src/boundary.js';
import { StoreLock } from '../src/lock.js';
import type { RootSession } from '../src/session.js';

const session = (spec: Partial<AgentSession['spec']> = {}, status: AgentSession['status'] = {}): AgentSession => ({
  metadata: { name: 's', namespace: 'ns', uid: 'u' }, spec: { sessionID: 'sid', ...spec }, status,
});
const tail = (t: Partial<Tail>): Tail => ({ ...emptyTail(), ...t });

describe('mustAsk', () => {
  test('nothing pending: no report', () => {
    assert.equal(mustAsk(session({ planMode: { active: true } }, { planMode: { selection: true, nextSeq: 10 } }), tail({ nextSeq: 10, turnOpen: true })), false);
  });
  test('a pending selection', () => {
    assert.equal(mustAsk(session({}, { planMode: { pending: true } }), tail({})), true);
  });
  test('a selection the manager has not taken on yet', () => {
    assert.equal(mustAsk(session({ planMode: { active: true } }, { planMode: { selection: false } }), tail({})), true);
  });
  test('a plan/mode in the log the status does not cover yet', () => {
    assert.equal(mustAsk(session({}, { planMode: { nextSeq: 5 } }), tail({ lastPlanModeSeq: 6, lastStepStartSeq: 2 })), true);
    assert.equal(mustAsk(session({}, { planMode: { nextSeq: 7 } }), tail({ lastPlanModeSeq: 6, lastStepStartSeq: 2 })), false);
  });
});

describe('owedNotice', () => {
  test('the manager\'s notice for the plan/mode after the last step', () => {
    const s = session({}, { planMode: { nextSeq: 13, notice: { seq: 12, text: NOTICE_ON } } });
    assert.equal(owedNotice(s, tail({ lastPlanModeSeq: 12, lastStepStartSeq: 8, active: true, told: false })), NOTICE_ON);
  });
  test('none once a step has started after it', () => {
    const s = session({}, { planMode: { nextSeq: 20, notice: { seq: 12, text: NOTICE_ON } } });
    assert.equal(owedNotice(s, tail({ lastPlanModeSeq: 12, lastStepStartSeq: 14, active: true, told: false })), undefined);
  });
  test('before the watch delivers it: the log\'s narration rule', () => {
    const s = session({}, { planMode: { nextSeq: 10 } });
    assert.equal(owedNotice(s, tail({ lastPlanModeSeq: 12, lastStepStartSeq: 8, active: false, told: true })), NOTICE_OFF);
    assert.equal(owedNotice(s, tail({ lastPlanModeSeq: 12, lastStepStartSeq: 8, active: true, told: true })), undefined, 'the last header already described it');
    assert.equal(owedNotice(s, tail({ lastPlanModeSeq: 12, lastStepStartSeq: -1, active: true, told: null })), undefined, 'no header yet: the first request states the mode');
  });
  test('a status past the plan/mode with no notice: none owed', () => {
    assert.equal(owedNotice(session({}, { planMode: { nextSeq: 13 } }), tail({ lastPlanModeSeq: 12, lastStepStartSeq: 8, active: true, told: false })), undefined);
  });
});

describe('pendingMessages', () => {
  const q = [{ id: 'a', text: '1' }, { id: 'b', text: '2' }, { id: 'c', text: '3' }];
  test('after the last recorded id, in order', () => {
    assert.deepEqual(pendingMessages(session({ steerQueue: q }, { agent: { steerID: 'a' } }), undefined).map((m) => m.id), ['b', 'c']);
    assert.deepEqual(pendingMessages(session({ steerQueue: q }, { agent: { steerID: 'a' } }), 'b').map((m) => m.id), ['c']);
  });
  test('an id no longer queued was delivered and dropped: the whole queue is new', () => {
    assert.deepEqual(pendingMessages(session({ steerQueue: q }, { agent: { steerID: 'z' } }), undefined).map((m) => m.id), ['a', 'b', 'c']);
  });
  test('a message with images keeps them, an image-only one has no text', () => {
    const img = { attachmentId: 'sha256:' + '0'.repeat(64), mediaType: 'image/png', width: 1, height: 1, bytes: 67, name: 'mockup.png' };
    const got = pendingMessages(session({ steerQueue: [{ id: 'i1', text: 'like this', images: [img] }, { id: 'i2', images: [img, img] }] }), undefined);
    assert.deepEqual(got, [{ id: 'i1', text: 'like this', images: [img] }, { id: 'i2', images: [img, img] }]);
  });
});

describe('settings', () => {
  const env = { PLANMODE_SESSION: 'team-a/dev', PLANMODE_LOG_STORE: 'sqlite:///var/lib/planmode/log.db?_busy_timeout=1' };
  test('read from the environment', () => {
    const c = loadConfig(env);
    assert.equal(c.namespace, 'team-a');
    assert.equal(c.name, 'dev');
    assert.deepEqual(c.logStore, { kind: 'sqlite', path: '/var/lib/planmode/log.db', shown: env.PLANMODE_LOG_STORE });
    assert.equal(c.boundaryWaitMs, 2000);
  });
  test('bad values name the variable and the fix', () => {
    assert.throws(() => loadConfig({ ...env, PLANMODE_SESSION: 'dev' }), /PLANMODE_SESSION="dev": expected <namespace>\/<name>/);
    assert.throws(() => loadConfig({ ...env, PLANMODE_LOG_STORE: '' }), /PLANMODE_LOG_STORE is not set/);
    assert.throws(() => loadConfig({ ...env, PLANMODE_BOUNDARY_WAIT_MS: 'soon' }), /PLANMODE_BOUNDARY_WAIT_MS="soon": expected a non-negative number/);
    assert.throws(() => sqlitePathOf('mysql://x'), /unsupported URL scheme in mysql/);
  });
  test('a PostgreSQL URL picks the PostgreSQL store; its password shows nowhere', () => {
    for (const url of ['postgres://planmode:s3cret@db:5432/log?sslmode=require', 'postgresql://planmode@db/log?password=s3cret']) {
      const c = loadConfig({ ...env, PLANMODE_LOG_STORE: url });
      assert.equal(c.logStore.kind, 'postgres');
      assert.equal(c.logStore.kind === 'postgres' && c.logStore.url, url);
      assert.doesNotMatch(c.logStore.shown, /s3cret/);
      assert.match(c.logStore.shown, /xxxxx/);
    }
    assert.throws(() => loadConfig({ ...env, PLANMODE_LOG_STORE: 'postgres://u:s3cret@[::1:bad/log' }), (e: Error) =>
      /PLANMODE_LOG_STORE=postgres:\/\/u:xxxxx@.*not a valid PostgreSQL URL/.test(e.message) && !e.message.includes('s3cret'));
  });
});

describe('store behaviours the plugin relies on', () => {
  const open = (busyTimeoutMs?: number) => {
    const dir = mkdtempSync(join(tmpdir(), 'plugin-'));
    return (p = join(dir, 'log.db')) => new SqliteLogStore(p, { busyTimeoutMs });
  };
  test('the harness\'s header fields are kept with the session it creates, and read back', () => {
    const s = open()();
    const header = { createdAt: 7, parentSession: 'root', cwd: '/srv/project', origin: 'subagent', delegationDepth: 1, agentPreset: 'standard' };
    s.append('child', [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }], { header });
    s.append('plain', [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }]);
    assert.deepEqual(s.info('child'), { id: 'child', createdAt: 7, seedLength: 0, parentSession: 'root', cwd: '/srv/project', origin: 'subagent', agentPreset: 'standard', delegationDepth: 1 });
    assert.deepEqual(s.list().map((r) => [r.id, r.cwd, r.delegationDepth]), [['child', '/srv/project', 1], ['plain', undefined, undefined]]);
  });
  test('a mirrored plan/mode the manager stored is taken as written, once', () => {
    const s = open()();
    s.append('x', [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }, { type: 'step/start', seq: 1, time: 1, data: { turn: 1, step: 1 } }, { type: 'step/end', seq: 2, time: 1, data: { turn: 1, step: 1 } }]);
    s.append('x', [{ type: 'plan/mode', seq: 3, time: 5, data: { active: true } }]); // the manager's
    const t = s.append('x', [{ type: 'plan/mode', seq: 3, time: 6, data: { active: true } }, { type: 'step/start', seq: 4, time: 6, data: { turn: 1, step: 2 } }], { adoptStoredPlanMode: true });
    assert.equal(t.nextSeq, 5);
    assert.deepEqual(s.readFrom('x', 0).map((e) => e.type), ['turn/start', 'step/start', 'step/end', 'plan/mode', 'step/start']);
    assert.equal(s.readFrom('x', 3)[0]!.time, 5, 'the stored event is the manager\'s');
    // A different stored state is still a conflict.
    assert.throws(() => s.append('x', [{ type: 'plan/mode', seq: 3, time: 6, data: { active: false } }], { adoptStoredPlanMode: true }), ConflictError);
    // Without the option, a conflict.
    assert.throws(() => s.append('x', [{ type: 'plan/mode', seq: 3, time: 6, data: { active: true } }]), ConflictError);
    s.close();
  });
  test('the write lock makes another connection wait until it is released', () => {
    const mk = open(50);
    const path = join(mkdtempSync(join(tmpdir(), 'lock-')), 'log.db');
    const agent = mk(path), manager = mk(path);
    agent.append('x', [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }, { type: 'turn/end', seq: 1, time: 1, data: { turn: 1, reason: { kind: 'completed' } } }]);
    const release = agent.hold();
    assert.throws(() => manager.append('x', [{ type: 'plan/mode', seq: 2, time: 1, data: { active: true } }]), /locked|busy/i);
    agent.append('x', [{ type: 'turn/start', seq: 2, time: 1, data: { turn: 2 } }]);
    release();
    assert.throws(() => manager.append('x', [{ type: 'plan/mode', seq: 2, time: 1, data: { active: true } }]), ConflictError, 'the manager finds the turn started');
    assert.equal(manager.tail('x').turnOpen, true);
    agent.close();
    manager.close();
  });
  test('a deleted file is never created again: every call fails with StoreLostError; the store\'s own backup put back is taken up', () => {
    const dir = mkdtempSync(join(tmpdir(), 'lost-'));
    const path = join(dir, 'log.db');
    const s = new SqliteLogStore(path);
    s.append('x', [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }]);
    const id = s.identity();
    s.db.exec(`VACUUM INTO '${join(dir, 'backup.db')}'`);
    for (const f of [path, path + '-wal', path + '-shm']) rmSync(f, { force: true });
    for (const call of [() => s.tail('x'), () => s.identity(), () => s.append('x', [{ type: 'turn/end', seq: 1, time: 1, data: { turn: 1, reason: { kind: 'completed' } } }]),
      () => s.claimOwner('x', { namespace: 'a', name: 'b', uid: 'c' }), () => s.hold()]) {
      assert.throws(call, (e: Error) => e instanceof StoreLostError && /its file was deleted/.test(e.message) && /docs\/operations\.md/.test(e.message));
      assert.equal(existsSync(path), false, 'no call creates the file');
    }
    const other = new SqliteLogStore(path); // a new store at the path: another identity
    const otherId = other.identity();
    other.close();
    assert.throws(() => s.tail('x'), (e: Error) => e instanceof StoreLostError && e.message.includes(otherId));
    for (const f of [path, path + '-wal', path + '-shm']) rmSync(f, { force: true });
    renameSync(join(dir, 'backup.db'), path);
    assert.equal(s.identity(), id);
    assert.equal(s.append('x', [{ type: 'turn/end', seq: 1, time: 1, data: { turn: 1, reason: { kind: 'completed' } } }]).nextSeq, 2);
    s.close();
  });
  test('a fork is for an AgentSession of the parent log\'s namespace, decided in the store\'s transaction', () => {
    const s = open()();
    s.append('p', [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }, { type: 'plan/mode', seq: 1, time: 1, data: { active: true } },
      { type: 'turn/end', seq: 2, time: 1, data: { turn: 1, reason: { kind: 'completed' } } }, { type: 'turn/start', seq: 3, time: 1, data: { turn: 2 } }]);
    const child = { namespace: 'team-a', name: 'child', uid: 'u-c' };
    assert.throws(() => s.fork('p', 'c0', -1, child), (e: Error) => e instanceof OwnershipError && e.refusal === 'ParentUnowned');
    s.claimOwner('p', { namespace: 'team-a', name: 'parent', uid: 'u-p' });
    assert.throws(() => s.fork('p', 'c1', -1, { namespace: 'team-b', name: 'thief', uid: 'u-t' }),
      (e: Error) => e instanceof OwnershipError && e.refusal === 'ParentOfAnotherNamespace' && !e.message.includes('team-a'));
    assert.equal(s.info('c1'), undefined, 'nothing of the parent was copied');
    s.claimOwner('taken', { namespace: 'team-a', name: 'other', uid: 'u-o' });
    assert.throws(() => s.fork('p', 'taken', -1, child), (e: Error) => e instanceof OwnershipError && e.refusal === 'OwnedByAnother');
    assert.throws(() => s.fork('p', 'c2', 3, child), /ends inside open turn 2/);
    const t = s.fork('p', 'c', -1, child);
    assert.deepEqual([t.nextSeq, t.active, t.turnOpen], [3, true, false]);
    assert.deepEqual(s.info('c'), { id: 'c', createdAt: s.info('c')!.createdAt, parentSession: 'p', seedLength: 3 });
    assert.deepEqual(s.claimOwner('c', { namespace: 'team-b', name: 'x', uid: 'u' }), child, 'the child is recorded as the fork\'s');
    assert.throws(() => s.fork('p', 'c', -1, child), ConflictError);
    s.close();
  });
  test('the Go store\'s schema version is checked', () => {
    const s = open()();
    s.db.exec('INSERT INTO schema_version (version) VALUES (99)');
    const p = s.path;
    s.close();
    assert.throws(() => new SqliteLogStore(p), /schema version 99; this plugin supports up to 1 \(upgrade the plugin\)/);
  });
});

describe('the store the session was recorded against', () => {
  const s = (storeID?: string, nextSeq?: number, annotations?: Record<string, string>) =>
    ({ metadata: { name: 'demo', annotations }, spec: { sessionID: 'demo-id' }, status: { planMode: { storeID, nextSeq } } });
  test('another identity, or a log that ends before the recorded position, is a mismatch naming the way out; an adoption lifts it', async () => {
    const { logStoreMismatch } = await import('../src/log-store.js');
    assert.equal(logStoreMismatch(s('a', 5), 'a', 5), undefined);
    assert.equal(logStoreMismatch(s(undefined, 0), 'b', 0), undefined, 'a status that records nothing yet');
    assert.match(logStoreMismatch(s('a', 5), 'b', 9)!, /has identity b, but this session's status was recorded against store a.*kubectl annotate agentsession demo agents\.harness\.dev\/adopt-log-store=b:9 --overwrite/);
    assert.match(logStoreMismatch(s('a', 5), 'a', 2)!, /ends at seq 2 in the log store, before seq 5/);
    assert.equal(logStoreMismatch(s('a', 5, { 'agents.harness.dev/adopt-log-store': 'b:9' }), 'b', 9), undefined);
  });
});

describe('/plan typed in the harness', () => {
  const img = { attachmentId: 'sha256:' + '1'.repeat(64), mediaType: 'image/png', width: 2, height: 2, bytes: 70, name: 'sketch.png' };
  test('parses as the harness does: the exact argument off leaves, anything else enters, a non-empty one is the message', async () => {
    const { parsePlanCommand } = await import('../src/command.js');
    assert.deepEqual(parsePlanCommand(' off '), { active: false, images: [] });
    assert.deepEqual(parsePlanCommand(''), { active: true, images: [] });
    assert.deepEqual(parsePlanCommand('on'), { active: true, message: 'on', images: [] });
    assert.deepEqual(parsePlanCommand('draft the migration'), { active: true, message: 'draft the migration', images: [] });
    assert.deepEqual(parsePlanCommand('', [{ type: 'image', attachment: img }]), { active: true, images: [img] });
  });
  test('/plan off with images is refused with the harness\'s text; other commands pass', async () => {
    const { parsePlanCommand, refusal } = await import('../src/command.js');
    const { PlanOffImagesRefused } = await import('../src/texts.js');
    assert.equal(refusal(parsePlanCommand('off', [{ type: 'image', attachment: img }])), PlanOffImagesRefused);
    assert.equal(refusal(parsePlanCommand('off')), undefined);
    assert.equal(refusal(parsePlanCommand('look', [{ type: 'image', attachment: img }])), undefined);
    assert.match(refusal(parsePlanCommand('', [{ type: 'image', attachment: { ...img, bytes: 2_000_000 } }])) ?? '', /at most 1024000 bytes/);
  });
  test('replies with the harness\'s text for what set() does, as pkg/planmode decides it', async () => {
    const { parsePlanCommand, planReply, planSet } = await import('../src/command.js');
    const t = await import('../src/texts.js');
    const on = parsePlanCommand(''), off = parsePlanCommand('off');
    const reply = (cmd: typeof on, st: Parameters<typeof planSet>[0]) => planReply(cmd, planSet(st, cmd.active).outcome, st.logged);
    assert.equal(reply(on, { logged: false, turnOpen: false }), t.ReplyOnCommitted);
    assert.equal(reply(on, { logged: false, turnOpen: true }), t.ReplyOnDeferred);
    assert.equal(reply(on, { logged: true, turnOpen: false }), t.ReplyOnDeferred, 'noop on an active session: the deferred copy, as the harness');
    assert.equal(reply(off, { logged: true, turnOpen: false }), t.ReplyOffCommitted);
    assert.equal(reply(off, { logged: true, turnOpen: true }), t.ReplyOffDeferred);
    assert.equal(reply(off, { logged: false, turnOpen: true, pending: true }), t.ReplyOffCancelled);
    assert.equal(reply(off, { logged: false, turnOpen: false }), t.ReplyOffAlreadyOff);
  });
  test('the state meets a selection the manager has not taken on first', async () => {
    const { stateFor } = await import('../src/command.js');
    const s = session({ planMode: { active: true } }, { planMode: { selection: false } });
    assert.deepEqual(stateFor(s, false, true), { logged: false, turnOpen: true, pending: true });
    assert.deepEqual(stateFor(s, false, false), { logged: true, turnOpen: false });
  });
  test('the patch selects, queues after the recorded messages under an id after every id used, guards the version', async () => {
    const { planPatch } = await import('../src/command.js');
    const s = session({ steerQueue: [{ id: 'plan-1', text: '1' }, { id: 'plan-2', text: '2' }] }, { agent: { steerID: 'plan-1' } });
    (s.metadata as { resourceVersion?: string }).resourceVersion = '42';
    const p = planPatch(s, { active: true, message: 'new', images: [] }, 1733000000000) as { metadata: { resourceVersion: string }; spec: Record<string, unknown> };
    assert.equal(p.metadata.resourceVersion, '42');
    assert.deepEqual(p.spec.planMode, { active: true });
    assert.deepEqual(p.spec.steerQueue, [{ id: 'plan-2', text: '2' }, { id: 'plan-1733000000000000000', text: 'new' }]);
    assert.deepEqual(planPatch(s, { active: false, images: [] }).spec, { planMode: { active: false } });
    const withImage = planPatch(session(), { active: true, images: [img] }, 1733000000000).spec as { steerQueue: unknown[] };
    assert.deepEqual(withImage.steerQueue, [{ id: 'plan-1733000000000000000', images: [img] }]);
    // A writer whose clock is ahead, or the last delivered id of an emptied queue: after it.
    const ahead = session({ steerQueue: [] }, { agent: { steerID: 'plan-9999999999999999999' } });
    const q = (planPatch(ahead, { active: true, message: 'm', images: [] }, 1733000000000) as { spec: { steerQueue: { id: string }[] } }).spec.steerQueue;
    assert.equal(q[0]!.id, 'plan-10000000000000000000');
  });
  test('message ids are ordered as pkg/steerid orders them', async () => {
    const { compareIds } = await import('../src/steerid.js');
    const ordered = ['1', '9', '10', 'a', 'kp-2', 'kp-10', 'kp-10-1', 'kp-10a', 'kp-1733000000000000000', 'kp-f81d', 'm01', 'm1', 'm2', 'm10', 'm10.1', 'plan-5'];
    for (let i = 0; i < ordered.length; i++) {
      assert.equal(compareIds(ordered[i]!, ordered[i]!), 0);
      for (let j = i + 1; j < ordered.length; j++) assert.ok(compareIds(ordered[i]!, ordered[j]!) < 0 && compareIds(ordered[j]!, ordered[i]!) > 0, `${ordered[i]} < ${ordered[j]}`);
    }
  });
  test('a full queue is refused with what to do', async () => {
    const { planPatch, MAX_QUEUE } = await import('../src/command.js');
    const q = Array.from({ length: MAX_QUEUE }, (_, i) => ({ id: `m${i}`, text: 'x' }));
    assert.throws(() => planPatch(session({ steerQueue: q }), { active: true, message: 'more', images: [] }), /wait for it to take some, then send again/);
  });
});

describe('spec.fork', () => {
  test('the agent seeds a fork through the store\'s ownership-checked fork, once; a refusal names spec.fork and copies nothing', async () => {
    const { seedFork } = await import('../src/fork.js');
    const s = new SqliteLogStore(join(mkdtempSync(join(tmpdir(), 'fork-')), 'log.db'));
    s.append('p', [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }, { type: 'plan/mode', seq: 1, time: 1, data: { active: true } },
      { type: 'turn/end', seq: 2, time: 1, data: { turn: 1, reason: { kind: 'completed' } } }, { type: 'turn/start', seq: 3, time: 1, data: { turn: 2 } }]);
    s.claimOwner('p', { namespace: 'team-a', name: 'parent', uid: 'u-p' });
    const fork = (namespace: string, sessionID: string, throughSeq?: number): AgentSession => ({
      metadata: { name: 'child', namespace, uid: 'u-c' }, spec: { sessionID, fork: { sessionID: 'p', ...(throughSeq !== undefined ? { throughSeq } : {}) } },
    });
    const logged: unknown[][] = [];
    const log = (...args: unknown[]) => { logged.push(args); };

    await assert.rejects(seedFork(s, fork('team-b', 'stolen'), log), (e: Error) => e.cause instanceof OwnershipError
      && (e.cause as OwnershipError).refusal === 'ParentOfAnotherNamespace'
      && e.message.startsWith('seed session "stolen" as a fork of "p" (spec.fork): ') && !e.message.includes('team-a'));
    assert.equal(s.info('stolen'), undefined, 'nothing of the parent was copied');
    await assert.rejects(seedFork(s, fork('team-a', 'inside', 3), log), /\(spec\.fork\): fork boundary 3 in session "p" ends inside open turn 2/);
    assert.equal(s.info('inside'), undefined);

    await seedFork(s, fork('team-a', 'c'), log);
    assert.deepEqual([s.info('c')?.parentSession, s.info('c')?.seedLength, s.tail('c').active], ['p', 3, true]);
    assert.deepEqual(s.claimOwner('c', { namespace: 'team-a', name: 'other', uid: 'u' }), { namespace: 'team-a', name: 'child', uid: 'u-c' }, 'the fork is recorded as the child\'s');
    const next = s.tail('c').nextSeq;
    await seedFork(s, fork('team-a', 'c'), log); // a restart finds it seeded
    assert.equal(s.tail('c').nextSeq, next);
    assert.equal(logged.length, 1);
    s.close();
  });
});

describe('the step boundary report', () => {
  // A store whose hold commits only when the test says: the between-turns hold that stored the
  // turn's turn/start (startTurn) can still be committing when the turn's first boundary comes.
  const slowCommitStore = () => {
    const commits: Array<() => void> = [];
    let held = false;
    const store = {
      get holding() { return held; },
      hold: () => {
        held = true;
        return () => { held = false; return new Promise<void>((resolve) => commits.push(resolve)); };
      },
    };
    return { store: store as unknown as LogStore, commits };
  };

  test('is sent only once the hold whose appends it counts is committed', async () => {
    const { store, commits } = slowCommitStore();
    const lock = new StoreLock(store, () => undefined);
    const reports: unknown[] = [];
    const answered = { turn: 9, step: 1, seq: 207, result: 'Admitted' as const, active: false, nextSeq: 207 };
    let status: AgentSession['status'] = { planMode: { pending: true, active: true } };
    const watch = {
      get: () => session({}, status),
      patchAgent: async (agent: Record<string, unknown>) => {
        reports.push(agent.boundary);
        status = { planMode: { ...status!.planMode, lastBoundary: answered } };
      },
      waitFor: async (pred: () => boolean) => pred(),
    } as unknown as SessionWatch;
    const t = tail({ nextSeq: 207, turnOpen: true, turn: 9, active: true });
    const root = { id: 'sid', session: { seq: 207 }, tail: () => t, catchUp: async () => undefined } as unknown as RootSession;
    const cfg = { boundaryWaitMs: 10_000 } as PluginConfig;

    const release = await lock.hold('sid'); // startTurn's hold: turn/start and the step are in its transaction
    const answer = boundary({ root, watch, store, lock, cfg, flush: async () => undefined, log: () => undefined },
      session({}, status), t, 9, 1);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(reports, [], 'reported while the hold was still held');
    const unlocked = lock.unlock(release);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(reports, [], 'reported before the hold\'s commit ended');
    commits.shift()!();
    await unlocked;
    const a = await answer;
    assert.equal(reports.length, 1);
    assert.equal((reports[0] as { seq: number }).seq, 207);
    assert.equal(a.reject, undefined);
  });
});
