// The one store per log store in this process: the persistence backend and the protocol
// plugin must share its connection, so the protocol's write lock (LogStore.hold) covers the
// backend's appends. The URL's scheme picks the backend.
import type { LogStoreLocation } from './config.js';
import type { LogStore } from './log-store.js';
import { PostgresLogStore } from './postgres-store.js';
import { SqliteLogStore } from './sqlite-store.js';

const stores = new Map<string, LogStore>();

const keyOf = (loc: LogStoreLocation) => (loc.kind === 'sqlite' ? `sqlite:${loc.path}` : loc.url);

export function sharedStore(loc: LogStoreLocation): LogStore {
  const key = keyOf(loc);
  let s = stores.get(key);
  if (!s) {
    s = loc.kind === 'sqlite' ? new SqliteLogStore(loc.path) : new PostgresLogStore(loc.url);
    stores.set(key, s);
  }
  return s;
}

export async function closeSharedStore(loc: LogStoreLocation): Promise<void> {
  const key = keyOf(loc);
  const s = stores.get(key);
  stores.delete(key);
  await s?.close();
}
