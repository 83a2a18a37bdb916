// The store's golden vectors (pkg/sessionlog/testdata/golden), shared with the Go store's
// TestGoldenVectors: the same batches must be stored, refused and folded the same way.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ConflictError, ValidationError, type LogEvent, type Tail } from '../src/events.js';
import type { LogStore } from '../src/log-store.js';
import { PostgresLogStore } from '../src/postgres-store.js';
import { SqliteLogStore } from '../src/sqlite-store.js';
import { startPostgres } from './pg-server.js';
import { repoRoot } from './helpers.js';

interface Step {
  append: LogEvent[];
  want: { tail?: Tail; conflict?: { expected: number; got: number }; invalid?: { seq: number; type: string; field: string } };
}
interface Case { name: string; steps: Step[]; events: string[] }

const file = join(repoRoot, 'pkg/sessionlog/testdata/golden/appends.json');
const cases = (JSON.parse(readFileSync(file, 'utf8')) as { cases: Case[] }).cases;

// Runs every case against store: the tail after every accepted batch (and the one tail()
// reads back), the conflict or validation error of every refused one, the stored types.
async function runGolden(store: LogStore): Promise<void> {
  assert.ok(cases.length > 0, `${file} has no cases`);
  for (const [ci, c] of cases.entries()) {
    const id = 'golden-' + String.fromCharCode(97 + ci);
    for (const [si, st] of c.steps.entries()) {
      const where = `${c.name} step ${si}`;
      const events = st.append.map((e) => ({ ...e, time: e.time ?? 0 }));
      if (st.want.tail) {
        assert.deepEqual(await store.append(id, events), st.want.tail, where);
        assert.deepEqual(await store.tail(id), st.want.tail, `${where}: tail() read back`);
      } else if (st.want.conflict) {
        await assert.rejects(async () => store.append(id, events), (e: unknown) => e instanceof ConflictError
          && e.expected === st.want.conflict!.expected && e.got === st.want.conflict!.got, where);
      } else if (st.want.invalid) {
        const w = st.want.invalid;
        await assert.rejects(async () => store.append(id, events), (e: unknown) => e instanceof ValidationError
          && e.seq === w.seq && e.type === w.type && e.field === w.field, where);
      } else {
        assert.fail(`${where}: the vector names no outcome`);
      }
    }
    assert.deepEqual((await store.readFrom(id, 0)).map((e) => e.type), c.events, c.name);
  }
}

test('golden vectors: the TypeScript SQLite store matches the Go store', async () => {
  const store = new SqliteLogStore(join(mkdtempSync(join(tmpdir(), 'golden-')), 'log.db'));
  try {
    await runGolden(store);
  } finally {
    store.close();
  }
});

test('golden vectors: the TypeScript PostgreSQL store matches the Go store', async (t) => {
  const server = await startPostgres();
  t.after(() => server.stop());
  const store = await new PostgresLogStore(server.url).open();
  try {
    await runGolden(store);
  } finally {
    await store.close();
  }
});
