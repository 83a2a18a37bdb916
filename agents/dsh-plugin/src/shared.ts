// The one store per log file in this process: the persistence backend and the protocol
// plugin must share its connection, so the protocol's write lock (SqliteLogStore.hold) covers
// the backend's appends.
import { SqliteLogStore } from './sqlite-store.js';

const stores = new Map<string, SqliteLogStore>();

export function sharedStore(path: string): SqliteLogStore {
  let s = stores.get(path);
  if (!s) {
    s = new SqliteLogStore(path);
    stores.set(path, s);
  }
  return s;
}

export function closeSharedStore(path: string): void {
  stores.get(path)?.close();
  stores.delete(path);
}
