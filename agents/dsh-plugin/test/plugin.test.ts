// Unit tests of the plugin's decisions (docs/protocol.md 5.1, 5.3, 10), its settings, and the
// store behaviours the plugin relies on: adopting a mirrored plan/mode, the write lock.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig, sqlitePathOf } from '../src/config.js';
import { ConflictError, emptyTail, type Tail } from '../src/events.js';
import type { AgentSession } from '../src/kube.js';
import { mustAsk, owedNotice, pendingMessages } from '../src/decide.js';
import { NoticeDefault as NOTICE_OFF, NoticePlanOn as NOTICE_ON } from '../src/texts.js';
import { SqliteLogStore } from '../src/sqlite-store.js';

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
  test('v1 spec.steer when the queue is empty, once', () => {
    assert.deepEqual(pendingMessages(session({ steer: { id: 's1', text: 'x' } }), undefined).map((m) => m.id), ['s1']);
    assert.deepEqual(pendingMessages(session({ steer: { id: 's1', text: 'x' } }, { agent: { steerID: 's1' } }), undefined), []);
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
  test('the Go store\'s schema version is checked', () => {
    const s = open()();
    s.db.exec('INSERT INTO schema_version (version) VALUES (99)');
    const p = s.path;
    s.close();
    assert.throws(() => new SqliteLogStore(p), /schema version 99; this plugin supports up to 1 \(upgrade the plugin\)/);
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
  test('the patch selects, queues after the recorded messages, moves a v1 steer to the front, guards the version', async () => {
    const { planPatch } = await import('../src/command.js');
    const s = session({ steerQueue: [{ id: 'a', text: '1' }, { id: 'b', text: '2' }], steer: { id: 'v1', text: 'old' } }, { agent: { steerID: 'a' } });
    (s.metadata as { resourceVersion?: string }).resourceVersion = '42';
    const p = planPatch(s, { active: true, message: 'new', images: [] }, 'n1') as { metadata: { resourceVersion: string }; spec: Record<string, unknown> };
    assert.equal(p.metadata.resourceVersion, '42');
    assert.deepEqual(p.spec.planMode, { active: true });
    assert.deepEqual(p.spec.steerQueue, [{ id: 'v1', text: 'old' }, { id: 'b', text: '2' }, { id: 'n1', text: 'new' }]);
    assert.equal(p.spec.steer, null);
    assert.deepEqual(planPatch(s, { active: false, images: [] }).spec, { planMode: { active: false } });
    const withImage = planPatch(session(), { active: true, images: [img] }, 'i1').spec as { steerQueue: unknown[] };
    assert.deepEqual(withImage.steerQueue, [{ id: 'i1', images: [img] }]);
  });
  test('a full queue is refused with what to do', async () => {
    const { planPatch, MAX_QUEUE } = await import('../src/command.js');
    const q = Array.from({ length: MAX_QUEUE }, (_, i) => ({ id: `m${i}`, text: 'x' }));
    assert.throws(() => planPatch(session({ steerQueue: q }), { active: true, message: 'more', images: [] }), /wait for it to take some, then send again/);
  });
});

describe('spec.fork', () => {
  test('the prefix through the last turn/end, or through an explicit seq outside an open turn', async () => {
    const { forkPrefix } = await import('../src/fork.js');
    const evs = [
      { type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } },
      { type: 'plan/mode', seq: 1, time: 1, data: { active: true } },
      { type: 'turn/end', seq: 2, time: 1, data: { turn: 1, reason: { kind: 'completed' } } },
      { type: 'turn/start', seq: 3, time: 1, data: { turn: 2 } },
    ];
    assert.deepEqual(forkPrefix('p', evs, -1).map((e) => e.seq), [0, 1, 2]);
    assert.deepEqual(forkPrefix('p', evs, 2).map((e) => e.seq), [0, 1, 2]);
    assert.throws(() => forkPrefix('p', evs, 3), /fork boundary 3 in session "p" ends inside open turn 2/);
  });
});
