// The protocol's decisions from the cached AgentSession and the log's tail (docs/protocol.md
// 5.1, 5.3, 10), apart from the harness so they are tested on their own.
import type { Tail } from './events.js';
import type { AgentSession } from './kube.js';
import { NOTICE_OFF, NOTICE_ON } from './notices.js';

/** Whether a boundary must be reported to the manager: something is pending (5.1). */
export function mustAsk(s: AgentSession, t: Tail): boolean {
  const pm = s.status?.planMode ?? {};
  const sel = s.spec.planMode?.active;
  return pm.pending === true || (sel !== undefined && sel !== pm.selection)
    || (t.lastPlanModeSeq > t.lastStepStartSeq && (pm.nextSeq ?? 0) <= t.lastPlanModeSeq);
}


/**
 * The notice a between-turns commit owes the first step after it (protocol 5.3): the
 * manager's status.planMode.notice for that plan/mode; before the watch has delivered it, the
 * same rule computed from the log (the last request/header described the other state).
 */
export function owedNotice(s: AgentSession, t: Tail): string | undefined {
  if (!(t.lastPlanModeSeq > t.lastStepStartSeq)) return undefined;
  const pm = s.status?.planMode;
  if (pm?.notice && pm.notice.seq === t.lastPlanModeSeq) return pm.notice.text;
  if ((pm?.nextSeq ?? 0) > t.lastPlanModeSeq) return undefined; // the manager's status covers it: nothing owed
  return t.told !== null && t.told !== t.active ? (t.active ? NOTICE_ON : NOTICE_OFF) : undefined;
}

/** The user messages not yet recorded, oldest first (protocol section 10). */
export function pendingMessages(s: AgentSession, lastRecorded: string | undefined): { id: string; text: string; images: number }[] {
  const q = s.spec.steerQueue ?? [];
  const last = lastRecorded ?? s.status?.agent?.steerID;
  let from = 0;
  if (last !== undefined) {
    const i = q.findIndex((m) => m.id === last);
    if (i >= 0) from = i + 1;
  }
  return q.slice(from).map((m) => ({ id: m.id, text: m.text ?? '', images: m.images?.length ?? 0 }));
}

