// /plan typed in the harness acts on the AgentSession as kubectl plan does: /plan and
// /plan off set spec.planMode.active; /plan TEXT also queues TEXT in spec.steerQueue (one write,
// guarded by the resourceVersion). The write is the user's, not the agent's: the admission
// webhook keeps an agent identity to status.agent, so the command uses the kubeconfig in
// PLANMODE_USER_KUBECONFIG (the person at the terminal), and a refusal is shown as the
// command's error (docs/agents.md, "Who may type /plan").
import type { AgentSession } from './kube.js';
import { maxId, nextId } from './steerid.js';

/** The largest queue kubectl plan message keeps (docs/protocol.md section 10). */
export const MAX_QUEUE = 64;

export type PlanCommand = { active: boolean; message?: string };

export function parsePlanCommand(rawInput: string): PlanCommand {
  const text = rawInput.trim();
  if (text === 'off') return { active: false };
  if (text === '' || text === 'on') return { active: true };
  return { active: true, message: text };
}

/**
 * The merge patch of spec for a command on session s: the selection, and for a message the
 * queue without the entries the agent has recorded (up to status.agent.steerID) and the new
 * message last, under an id after every id the session has used (steerid.ts: the webhook
 * refuses any other).
 */
export function planPatch(s: AgentSession, cmd: PlanCommand, nowMs = Date.now()): Record<string, unknown> {
  const spec: Record<string, unknown> = { planMode: { active: cmd.active } };
  if (cmd.message !== undefined) {
    let queue = [...(s.spec.steerQueue ?? [])];
    const recorded = s.status?.agent?.steerID;
    const last = maxId(recorded, ...queue.map((m) => m.id));
    const i = recorded === undefined ? -1 : queue.findIndex((m) => m.id === recorded);
    if (i >= 0) queue = queue.slice(i + 1);
    if (queue.length >= MAX_QUEUE) throw new Error(`the session already holds ${queue.length} messages the agent has not taken; wait for it to take some, then send again`);
    queue.push({ id: nextId('plan-', last, nowMs), text: cmd.message });
    spec.steerQueue = queue;
  }
  return { metadata: { resourceVersion: (s.metadata as { resourceVersion?: string }).resourceVersion }, spec };
}

export function planResultText(cmd: PlanCommand): string {
  if (!cmd.active) return 'Plan mode off (applies at the next step boundary, or at once between turns).';
  return cmd.message === undefined
    ? 'Entering plan mode (applies at the next step boundary, or at once between turns).'
    : 'Entering plan mode; message queued for the agent.';
}
