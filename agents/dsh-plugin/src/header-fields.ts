// The harness's own session header fields the store keeps beside the sessions row, in the
// session_headers table (pkg/sessionlog header.go): both stores write them with a session's
// creation and read them back with its header.
import type { HarnessHeaderFields } from './log-store.js';

/** The session_headers columns after session_id, in the order of harnessHeaderArgs. */
export const HEADER_COLS = 'cwd, origin, agent_preset, delegation_depth';

export function hasHarnessHeader(h: HarnessHeaderFields): boolean {
  return h.cwd !== undefined || h.origin !== undefined || h.agentPreset !== undefined || (h.delegationDepth ?? 0) !== 0;
}

/** The column values of h, NULL for an absent text. */
export function harnessHeaderArgs(h: HarnessHeaderFields): (string | number | null)[] {
  return [h.cwd ?? null, h.origin ?? null, h.agentPreset ?? null, h.delegationDepth ?? 0];
}

/** The fields of a row read with HEADER_COLS (a session without a session_headers row has none). */
export function harnessHeaderOf(r: Record<string, unknown>): HarnessHeaderFields {
  const out: HarnessHeaderFields = {};
  if (typeof r.cwd === 'string') out.cwd = r.cwd;
  if (typeof r.origin === 'string') out.origin = r.origin;
  if (typeof r.agent_preset === 'string') out.agentPreset = r.agent_preset;
  if (r.delegation_depth !== null && r.delegation_depth !== undefined) out.delegationDepth = Number(r.delegation_depth as number | string | bigint);
  return out;
}
