// The store's golden vectors (pkg/sessionlog/testdata/golden), shared with the Go store's
// TestGoldenVectors: the same batches must be stored, refused and folded the same way.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ConflictError, ValidationError, type LogEvent, type Tail } from '../src/events.js';
import { SqliteLogStore } from '../src/sqlite-store.js';
import { repoRoot } from './helpers.js';

interface Step {
  append: LogEvent[];
  want: { tail?: Tail; conflict?: { expected: number; got: number }; invalid?: { seq: number; type: string; field: string } };
}
interface Case { name: string; steps: Step[]; events: string[] }

const file = join(repoRoot, 'pkg/sessionlog/testdata/golden/appends.json');
const cases = (JSON.parse(readFileSync(file, 'utf8')) as { cases: Case[] }).cases;

test('golden vectors: the TypeScript store matches the Go store', () => {
  assert.ok(cases.length > 0, `${file} has no cases`);
  const store = new SqliteLogStore(join(mkdtempSync(join(tmpdir(), 'golden-')), 'log.db'));
  try {
    cases.forEach((c, ci) => {
      const id = 'golden-' + String.fromCharCode(97 + ci);
      c.steps.forEach((st, si) => {
        const where = `${c.name} step ${si}`;
        const events = st.append.map((e) => ({ ...e, time: e.time ?? 0 }));
        if (st.want.tail) {
          assert.deepEqual(store.append(id, events), st.want.tail, where);
          assert.deepEqual(store.tail(id), st.want.tail, `${where}: tail() read back`);
        } else if (st.want.conflict) {
          assert.throws(() => store.append(id, events), (e: unknown) => e instanceof ConflictError
            && e.expected === st.want.conflict!.expected && e.got === st.want.conflict!.got, where);
        } else if (st.want.invalid) {
          const w = st.want.invalid;
          assert.throws(() => store.append(id, events), (e: unknown) => e instanceof ValidationError
            && e.seq === w.seq && e.type === w.type && e.field === w.field, where);
        } else {
          assert.fail(`${where}: the vector names no outcome`);
        }
      });
      assert.deepEqual(store.readFrom(id, 0).map((e) => e.type), c.events, c.name);
    });
  } finally {
    store.close();
  }
});
