// The session object the plugin's parts share: the root agent of spec.sessionID (the one agent
// whose plan mode the AgentSession governs) and what the protocol remembers about it, and the
// plan state of every agent, root or delegated, folded from its own in-memory log.
import { apply as applyEvent, check, emptyTail, type LogEvent, type Tail } from './events.js';
import type { Agent, HarnessSession } from './harness-api.js';
import type { LogStore } from './log-store.js';

/** Incremental fold of one in-memory session: O(new events) per read. */
class MemoryTail {
  private n = 0;
  readonly t: Tail = emptyTail();
  of(events: readonly LogEvent[]): Tail {
    for (; this.n < events.length; this.n++) {
      const ev = events[this.n]!;
      try { applyEvent(this.t, ev, check('', ev)); } catch { this.t.nextSeq = ev.seq + 1; }
    }
    return this.t;
  }
}

/** The tail of each agent's in-memory log (root and delegated children alike). */
export class Tails {
  private readonly bySession = new WeakMap<HarnessSession, MemoryTail>();
  of(session: HarnessSession): Tail {
    let m = this.bySession.get(session);
    if (!m) { m = new MemoryTail(); this.bySession.set(session, m); }
    return m.of(session.events);
  }
}

/** What a step boundary decided for the step (turn/step) it was reached for. */
export interface Answer {
  key: string;
  /** The manager failed the proposal: the step is rejected with this reason. */
  reject?: string;
  /** The notice the admitted step records last. */
  notice?: string;
}

export interface ReportedBoundary { turn: number; step: number; seq: number }

/** The root agent of spec.sessionID and the protocol's memory of it. */
export class RootSession {
  /** The answer of the boundary of the step being proposed (agent/pre-step reads it). */
  answer?: Answer;
  /** The last boundary this process reported (it may not be in the watch yet). */
  lastReported?: ReportedBoundary;
  /** The id of the last steerQueue message this process recorded. */
  lastRecorded?: string;

  constructor(readonly agent: Agent, readonly id: string, private readonly tails: Tails) {}

  get session(): HarnessSession { return this.agent.session; }
  tail(): Tail { return this.tails.of(this.agent.session); }

  /**
   * Mirrors the plan/mode events the manager stored past the harness's in-memory end (its seq
   * counter), so the harness's next event takes the next free seq. Anything else there is
   * another writer.
   */
  async catchUp(store: LogStore): Promise<void> {
    const stored = await store.readFrom(this.id, this.session.seq);
    for (const ev of stored) {
      if (ev.type !== 'plan/mode') throw new Error(`session log ${this.id}: seq ${ev.seq} holds ${ev.type} written by another process; one live writer per session`);
      this.session.append('plan/mode', { active: (ev.data as { active: boolean }).active });
    }
  }
}

/** Step key of a boundary. */
export const stepKey = (turn: number, step: number) => `${turn}/${step}`;
