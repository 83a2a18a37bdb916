// The store's write lock as the protocol uses it (docs/protocol.md section 15): held from a
// catch-up read to the harness's next batch, so a plan/mode the manager commits meanwhile is
// never overtaken by an event the harness has numbered in memory.
import type { Awaitable, LogStore } from './log-store.js';

export class StoreLock {
  // The release of the lock held until the session's next stored batch, if any.
  private releaseHeld?: () => void;
  // One per hold taken and not yet released and committed: the appends made under a hold join
  // its transaction, and no other connection sees them before its commit.
  private readonly uncommitted = new Set<Promise<void>>();

  constructor(private readonly store: LogStore, private readonly log: (msg: string, ...args: unknown[]) => void) {}

  get holding(): boolean { return this.store.holding; }

  /** Takes the lock of sessionId's log (the between-turns lock). */
  hold(sessionId: string): Promise<() => Awaitable<void>> {
    return this.take(sessionId);
  }

  /**
   * Resolves once every hold taken so far is released and its commit has ended: what this
   * process stored is then in the store for any reader. A step boundary is reported only then:
   * the turn's first boundary can come while the hold that stored its turn/start is still
   * being committed, and the manager, reading the log, would find no open turn.
   */
  async committed(): Promise<void> {
    while (this.uncommitted.size > 0) await Promise.all(this.uncommitted);
  }

  // The store's hold, with its release marked committed once it ends (failed or not).
  private async take(sessionId: string): Promise<() => Awaitable<void>> {
    const release = await this.store.hold(sessionId);
    let ended!: () => void;
    const pending = new Promise<void>((resolve) => { ended = resolve; });
    this.uncommitted.add(pending);
    const end = () => { this.uncommitted.delete(pending); ended(); };
    return () => {
      let out: Awaitable<void>;
      try {
        out = release();
      } catch (e) {
        end();
        throw e;
      }
      return Promise.resolve(out).finally(end);
    };
  }

  /**
   * Runs a release. One that fails (the database went away) ends the transaction anyway; it is
   * logged. SQLite's release is synchronous and must stay so: the next hold() may follow at once.
   */
  unlock(release: (() => Awaitable<void>) | undefined): Promise<void> {
    const failed = (e: Error) => this.log('release the session log lock: %s', e.message);
    try {
      return Promise.resolve(release?.()).catch(failed);
    } catch (e) {
      failed(e as Error);
      return Promise.resolve();
    }
  }

  /**
   * Holds the lock until sessionId's next batch is stored, or boundMs at most should the harness
   * write nothing. Nothing happens when the lock is held already.
   */
  async holdUntilNextAppend(sessionId: string, boundMs: number): Promise<void> {
    if (this.store.holding) return;
    const release = await this.take(sessionId);
    const done = () => {
      clearTimeout(timer);
      this.store.onAppend = undefined;
      this.releaseHeld = undefined;
      void this.unlock(release);
    };
    const timer = setTimeout(done, boundMs);
    this.releaseHeld = done;
    this.store.onAppend = (id) => { if (id === sessionId) queueMicrotask(done); };
  }

  /** Lets go of a lock holdUntilNextAppend keeps, at once. */
  releaseNow(): void { this.releaseHeld?.(); }
}
