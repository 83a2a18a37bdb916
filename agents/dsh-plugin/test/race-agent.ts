// The agent side of the between-turns race test (test/dshagent/race_test.go): it runs turns
// the way the plugin starts them (docs/protocol.md section 15) while the Go test commits idle
// toggles into the same store as the manager does (a SQLite file, or a PostgreSQL database). With the lock (the default) the
// catch-up read and the turn/start are one step against the manager's writes; --no-lock shows
// what the harness met without it. The gap between them stands for the harness's own (its
// followup is picked up by the agent loop, and the batch flushed, asynchronously).
// Usage: node race-agent.js STORE SESSION [--no-lock], STORE a SQLite file or a postgres://
// URL; stops when stdin closes; prints a summary.
import { logStoreOf } from '../src/config.js';
import { ConflictError, type LogEvent } from '../src/events.js';
import { sharedStore } from '../src/shared.js';
import { NoticeDefault as NOTICE_OFF, NoticePlanOn as NOTICE_ON } from '../src/texts.js';

const [db, id, flag] = process.argv.slice(2);
if (!db || !id) throw new Error('usage: race-agent STORE SESSION [--no-lock]');
const lock = flag !== '--no-lock';
const store = sharedStore(logStoreOf(db));
let stop = false;
process.stdin.on('end', () => { stop = true; }).resume();

let seq = 0, active = false, told: boolean | null = null, turn = 0;
let turns = 0, conflicts = 0, mirrored = 0;
const ev = (type: string, data: unknown, extra: Partial<LogEvent> = {}): LogEvent => ({ type, seq: seq++, time: Date.now(), data, ...extra });
const gap = () => new Promise((r) => setTimeout(r, Math.random() < 0.5 ? 0 : 1));

while (!stop) {
  const release = lock ? await store.hold(id) : () => undefined;
  try {
    // Catch up: mirror what the manager stored past our end; only plan/mode may be there.
    for (const e of await store.readFrom(id, seq)) {
      if (e.type !== 'plan/mode') throw new Error(`seq ${e.seq} holds ${e.type}: another writer`);
      active = (e.data as { active: boolean }).active;
      seq = e.seq + 1;
      mirrored++;
    }
    await gap();
    const start = seq;
    try {
      await store.append(id, [ev('turn/start', { turn: turn + 1 })]);
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
      conflicts++;
      seq = start;
      continue;
    }
    turn++;
  } finally {
    await release();
  }
  // The rest of the turn: the manager never writes into an open turn between boundaries.
  const batch: LogEvent[] = [ev('step/start', { turn, step: 1 }),
    ev('user/message', { content: [{ type: 'text', text: `turn ${turn}` }], source: { kind: 'user' }, role: 'user', id: `m${turn}` }, { surfaceOp: 'append' })];
  if (told !== null && told !== active) {
    const text = active ? NOTICE_ON : NOTICE_OFF;
    batch.push(ev('user/message', { content: [{ type: 'text', text }], source: { kind: 'plugin', plugin: 'plan-mode', form: 'notice', summary: text }, role: 'user', id: `n${turn}` }, { surfaceOp: 'append' }));
  }
  batch.push(ev('request/header', { header: { config: { provider: 'deepseek', model: 'm' }, system: active ? 'You are in plan mode.' : 'default', tools: [] }, reason: told === null ? 'initial' : 'change' }));
  told = active;
  batch.push(ev('step/end', { turn, step: 1 }), ev('turn/end', { turn, reason: { kind: 'completed' } }));
  await store.append(id, batch);
  turns++;
  await gap();
}
// The toggles committed after the last turn started: mirrored as the next turn would.
for (const e of await store.readFrom(id, seq)) {
  if (e.type !== 'plan/mode') throw new Error(`seq ${e.seq} holds ${e.type}: another writer`);
  mirrored++;
}
await store.close();
process.stdout.write(JSON.stringify({ turns, conflicts, mirrored, lock }) + '\n');
