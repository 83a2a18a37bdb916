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
    // A store that is not the one opened takes no step: the agent stops (the pod restarts it,
    // and the agent then refuses to start on another store until it is adopted), as the Go
    // SDK's agents do; the manager shows LogStoreMismatch.
    s.onLost = (e) => {
      process.stderr.write(`planmode-agent: ${e.message}\n`);
      process.exitCode = 1;
      setImmediate(() => process.exit(1));
    };
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
