// /plan typed in the harness acts on the AgentSession as kubectl plan does: /plan and
// /plan off set spec.planMode.active; /plan TEXT (and /plan with images) also queues the
// message in spec.steerQueue (one write, guarded by the resourceVersion), its images in their
// ConfigMaps first. The reply is the harness's own text for what set() does with the selection
// (committed, queued, cancelled or a noop), decided as the manager will from the root agent's
// committed state and the selection it has not applied yet; /plan off with images is refused
// before anything changes. The write is the user's, not the agent's: the admission webhook
// keeps an agent identity to status.agent, so the command uses the kubeconfig in
// PLANMODE_USER_KUBECONFIG (the person at the terminal), and a refusal is shown as the
// command's error (docs/agents.md, "Who may type /plan").
import type { ContentBlock, ImageAttachmentRef } from './harness-api.js';
import type { AgentSession } from './kube.js';
import { maxId, nextId } from './steerid.js';
import {
  PlanOffImagesRefused, ReplyOffAlreadyOff, ReplyOffCancelled, ReplyOffCommitted, ReplyOffDeferred, ReplyOnCommitted, ReplyOnDeferred,
} from './texts.js';

/** The largest queue kubectl plan message keeps (docs/protocol.md section 10). */
export const MAX_QUEUE = 64;
/** The most bytes an attached image holds (api/v1alpha1 MaxImageBytes: its ConfigMap stays under 1 MiB). */
export const MAX_IMAGE_BYTES = 1024000;

/** The selection and the message of one /plan. */
export type PlanCommand = { active: boolean; message?: string; images: ImageAttachmentRef[] };

/**
 * The harness's parse: the exact trimmed argument off leaves plan mode, anything else enters
 * it, and a non-empty argument other than off is the message (so /plan on sends "on").
 */
export function parsePlanCommand(rawInput: string, attachments: readonly ContentBlock[] = []): PlanCommand {
  const text = rawInput.trim();
  const images = attachments.flatMap((b) => (b.type === 'image' ? [b.attachment] : []));
  if (text === 'off') return { active: false, images };
  return { active: true, ...(text === '' ? {} : { message: text }), images };
}

/** The refusal of a /plan that must change nothing, or undefined. */
export function refusal(cmd: PlanCommand): string | undefined {
  if (!cmd.active && cmd.images.length > 0) return PlanOffImagesRefused;
  const big = cmd.images.find((i) => i.bytes > MAX_IMAGE_BYTES);
  if (big) return `/plan: image ${big.name ?? big.attachmentId} has ${big.bytes} bytes; an attached image holds at most ${MAX_IMAGE_BYTES} bytes: shrink or crop it`;
  return undefined;
}

/** What set() did with a selection (pkg/planmode Outcome). */
export type Outcome = 'committed' | 'queued' | 'cancelled' | 'noop';

/** The state set() decides from (pkg/planmode State): the log's state, the open turn, the pending selection. */
export interface SetState { logged: boolean; turnOpen: boolean; pending?: boolean }

/** set(x) on s (pkg/planmode Set): the outcome and the state after it. */
export function planSet(s: SetState, x: boolean): { outcome: Outcome; state: SetState } {
  if (x === (s.pending ?? s.logged)) return { outcome: 'noop', state: s };
  if (s.turnOpen) return { outcome: x === s.logged ? 'cancelled' : 'queued', state: { ...s, pending: x } };
  if (x === s.logged) return { outcome: 'cancelled', state: { logged: s.logged, turnOpen: false } };
  return { outcome: 'committed', state: { logged: x, turnOpen: false } };
}

/**
 * The state the user's /plan meets: the root agent's committed state and open turn, the
 * manager's pending selection, and a selection in spec the manager has not taken on yet
 * applied first, because the manager applies it before this one (internal/plancli StateOf).
 */
export function stateFor(s: AgentSession, logged: boolean, turnOpen: boolean): SetState {
  const pm = s.status?.planMode;
  let st: SetState = { logged, turnOpen, ...(pm?.pending && pm.pendingActive !== undefined ? { pending: pm.pendingActive } : {}) };
  const want = s.spec.planMode?.active;
  if (want !== undefined && want !== pm?.selection) st = planSet(st, want).state;
  return st;
}

/** The /plan reply for an outcome (pkg/planmode PlanCommandReply). */
export function planReply(cmd: PlanCommand, outcome: Outcome, logged: boolean): string {
  if (cmd.active) return outcome === 'committed' ? ReplyOnCommitted : ReplyOnDeferred;
  switch (outcome) {
    case 'committed': return ReplyOffCommitted;
    case 'queued': return ReplyOffDeferred;
    case 'cancelled': return ReplyOffCancelled;
    default: return logged ? ReplyOffDeferred : ReplyOffAlreadyOff;
  }
}

/**
 * The merge patch of spec for a command on session s: the selection, and for a message the
 * queue without the entries the agent has recorded (up to status.agent.steerID) and the new
 * message last, under an id after every id the session has used (steerid.ts: the webhook
 * refuses any other).
 */
export function planPatch(s: AgentSession, cmd: PlanCommand, nowMs = Date.now()): Record<string, unknown> {
  const spec: Record<string, unknown> = { planMode: { active: cmd.active } };
  if (cmd.message !== undefined || cmd.images.length > 0) {
    let queue = [...(s.spec.steerQueue ?? [])];
    const recorded = s.status?.agent?.steerID;
    const last = maxId(recorded, ...queue.map((m) => m.id));
    const i = recorded === undefined ? -1 : queue.findIndex((m) => m.id === recorded);
    if (i >= 0) queue = queue.slice(i + 1);
    if (queue.length >= MAX_QUEUE) throw new Error(`the session already holds ${queue.length} messages the agent has not taken; wait for it to take some, then send again`);
    queue.push({
      id: nextId('plan-', last, nowMs),
      ...(cmd.message !== undefined ? { text: cmd.message } : {}), ...(cmd.images.length > 0 ? { images: cmd.images } : {}),
    });
    spec.steerQueue = queue;
  }
  return { metadata: { resourceVersion: s.metadata.resourceVersion }, spec };
}
