// The agent's liveness Lease (docs/protocol.md, "Agent liveness"): while the plugin runs it holds
// the coordination.k8s.io Lease agentsession-<session> in the session's namespace and renews it
// every 30 s (duration 90 s), so the manager and kubectl plan can tell a reviewer that no agent
// waits for a plan. One write per interval, never per step; a failed renewal is logged and
// retried, and never stops the agent. PLANMODE_AGENT_LEASE=off turns it off (for benchmarks that
// count the protocol's own requests). The same as pkg/agentsdk/lease.go.
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';

export const LEASE_PREFIX = 'agentsession-';
export const LEASE_DURATION_SECONDS = 90;
export const LEASE_RENEW_MS = 30_000;
const SESSION_LABEL = 'agents.harness.dev/session';

export function leaseName(session: string): string {
  let name = LEASE_PREFIX + session;
  if (name.length > 253) name = name.slice(0, 253).replace(/[.-]+$/, '');
  return name;
}

const status = (e: unknown): number | undefined => (e as { code?: number })?.code;

export class AgentLease {
  private readonly api: k8s.CoordinationV1Api;
  private readonly name: string;
  private readonly holder = `${hostname()}/${randomUUID()}`;
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(readonly namespace: string, readonly session: string, private readonly log: (msg: string, ...args: unknown[]) => void, kc?: k8s.KubeConfig) {
    const config = kc ?? new k8s.KubeConfig();
    if (!kc) config.loadFromDefault();
    this.api = config.makeApiClient(k8s.CoordinationV1Api);
    this.name = leaseName(session);
  }

  /** Starts renewing (unless PLANMODE_AGENT_LEASE=off). */
  start(): void {
    if (process.env.PLANMODE_AGENT_LEASE === 'off' || this.timer) return;
    const tick = () => { this.running = this.renew().catch((e) => this.log('renew the agent liveness Lease %s: %s', this.name, (e as Error)?.message ?? e)); };
    tick();
    this.timer = setInterval(tick, LEASE_RENEW_MS);
    this.timer.unref();
  }

  /** Stops renewing and deletes the Lease if this process still holds it. */
  async stop(): Promise<void> {
    if (!this.timer) return;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
    try {
      const cur = await this.api.readNamespacedLease({ name: this.name, namespace: this.namespace });
      if (cur.spec?.holderIdentity !== this.holder) return;
      await this.api.deleteNamespacedLease({ name: this.name, namespace: this.namespace, body: { preconditions: { resourceVersion: cur.metadata?.resourceVersion } } });
    } catch (e) {
      if (status(e) !== 404 && status(e) !== 409) this.log('release the agent liveness Lease %s: %s', this.name, (e as Error)?.message ?? e);
    }
  }

  private async renew(): Promise<void> {
    const now = new k8s.V1MicroTime();
    let cur: k8s.V1Lease;
    try {
      cur = await this.api.readNamespacedLease({ name: this.name, namespace: this.namespace });
    } catch (e) {
      if (status(e) !== 404) throw e;
      await this.api.createNamespacedLease({ namespace: this.namespace, body: {
        metadata: { name: this.name, labels: { [SESSION_LABEL]: this.session } },
        spec: { holderIdentity: this.holder, leaseDurationSeconds: LEASE_DURATION_SECONDS, acquireTime: now, renewTime: now },
      } });
      return;
    }
    const spec = cur.spec ?? {};
    if (spec.holderIdentity !== this.holder) { spec.holderIdentity = this.holder; spec.acquireTime = now; }
    spec.renewTime = now;
    spec.leaseDurationSeconds = LEASE_DURATION_SECONDS;
    cur.spec = spec;
    await this.api.replaceNamespacedLease({ name: this.name, namespace: this.namespace, body: cur });
  }
}
