// One watch of the agent's AgentSession (fieldSelector metadata.name) and one of its
// namespace's PlanModeConfigs, through @kubernetes/client-node (docs/protocol.md section 4).
// Every protocol read comes from this cache: no API read per step. Writes are merge patches
// of status.agent with field manager planmode-agent, only when something is to be said.
import * as k8s from '@kubernetes/client-node';

export const GROUP = 'agents.harness.dev';
export const VERSION = 'v1alpha1';
const FIELD_MANAGER = 'planmode-agent';

// Only the fields this plugin reads.
export interface Boundary { turn: number; step: number; seq: number; time?: string }
export interface LastBoundary extends Boundary { result: 'Admitted' | 'Failed' | 'Dismissed'; active?: boolean; nextSeq?: number; notice?: string; reason?: string; message?: string }
export interface AgentSession {
  metadata: { name: string; namespace: string; uid: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec: {
    sessionID: string;
    planMode?: { active?: boolean; configRef?: { name?: string } };
    // text is optional beside images (kubectl plan message --image); this plugin forwards
    // the text only (docs/agents.md).
    steerQueue?: { id: string; text?: string; images?: { attachmentId: string; name?: string }[] }[];
  };
  status?: {
    planMode?: { active?: boolean; pending?: boolean; selection?: boolean; nextSeq?: number; storeID?: string; notice?: { seq: number; text: string }; lastBoundary?: LastBoundary; queuedInTurn?: number };
    agent?: { boundary?: Boundary; steerID?: string; review?: { id: string } };
    review?: { id: string; phase: string; message?: string };
  };
}
export interface PlanModeConfig { metadata: { name: string; generation?: number }; spec: { section: string } }

type Waiter = { pred: () => boolean; resolve: () => void };

export class SessionWatch {
  private readonly kc: k8s.KubeConfig;
  private readonly api: k8s.CustomObjectsApi;
  private readonly watch: k8s.Watch;
  private session?: AgentSession;
  private readonly configs = new Map<string, PlanModeConfig>();
  private readonly aborts: AbortController[] = [];
  private waiters: Waiter[] = [];
  private stopped = false;
  /** API requests this process sent (lists, watches, patches): the benchmark reads it. */
  requests = 0;
  onChange?: () => void;

  constructor(readonly namespace: string, readonly name: string, kc?: k8s.KubeConfig) {
    this.kc = kc ?? new k8s.KubeConfig();
    if (!kc) this.kc.loadFromDefault();
    this.api = this.kc.makeApiClient(k8s.CustomObjectsApi);
    this.watch = new k8s.Watch(this.kc);
  }

  /** Lists both kinds once and starts their watches; resolves when the cache is filled. */
  async start(): Promise<void> {
    const fieldSelector = `metadata.name=${this.name}`;
    const sessions = await this.list('agentsessions', fieldSelector);
    this.session = sessions.items[0] as AgentSession | undefined;
    if (!this.session) throw new Error(`AgentSession ${this.namespace}/${this.name} not found: create it first (config/samples)`);
    const configs = await this.list('planmodeconfigs');
    for (const c of configs.items as PlanModeConfig[]) this.configs.set(c.metadata.name, c);
    this.run('agentsessions', sessions.rv, fieldSelector, (type, obj) => {
      if (type === 'DELETED') this.session = undefined;
      else this.session = obj as AgentSession;
    });
    this.run('planmodeconfigs', configs.rv, undefined, (type, obj) => {
      // A deleted config's guidance stays: plan mode committed without its config runs with the
      // guidance last seen (docs/protocol.md section 14).
      const c = obj as PlanModeConfig;
      if (type !== 'DELETED') this.configs.set(c.metadata.name, c);
    });
  }

  private async list(plural: string, fieldSelector?: string): Promise<{ items: unknown[]; rv: string }> {
    this.requests++;
    const out = (await this.api.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: this.namespace, plural, fieldSelector })) as { items: unknown[]; metadata: { resourceVersion: string } };
    return { items: out.items, rv: out.metadata.resourceVersion };
  }

  // A watch ends after the server's timeout; it is started again from the last version
  // seen, with no new list (a 410 Gone alone relists).
  private run(plural: string, rv: string, fieldSelector: string | undefined, apply: (type: string, obj: unknown) => void): void {
    if (this.stopped) return;
    let last = rv;
    const path = `/apis/${GROUP}/${VERSION}/namespaces/${this.namespace}/${plural}`;
    this.requests++;
    this.watch.watch(path, { resourceVersion: last, allowWatchBookmarks: true, ...(fieldSelector ? { fieldSelector } : {}) }, (type, obj) => {
      const v = (obj as { metadata?: { resourceVersion?: string } })?.metadata?.resourceVersion;
      if (v) last = v;
      if (type === 'BOOKMARK') return;
      if (type === 'ERROR') { last = ''; return; }
      apply(type, obj);
      this.changed();
    }, () => {
      if (this.stopped) return;
      if (last === '') {
        this.list(plural, fieldSelector).then((l) => {
          if (plural === 'agentsessions') this.session = l.items[0] as AgentSession | undefined;
          else for (const c of l.items as PlanModeConfig[]) this.configs.set(c.metadata.name, c);
          this.changed();
          this.run(plural, l.rv, fieldSelector, apply);
        }, () => setTimeout(() => this.run(plural, '', fieldSelector, apply), 1000));
      } else {
        this.run(plural, last, fieldSelector, apply);
      }
    }).then((a) => this.aborts.push(a), () => setTimeout(() => this.run(plural, last, fieldSelector, apply), 1000));
  }

  private changed(): void {
    const ready = this.waiters.filter((w) => w.pred());
    this.waiters = this.waiters.filter((w) => !ready.includes(w));
    for (const w of ready) w.resolve();
    this.onChange?.();
  }

  get(): AgentSession | undefined { return this.session; }
  config(name: string): PlanModeConfig | undefined { return this.configs.get(name); }

  /** Resolves true when pred holds on the cache (now or after a watch event), false after ms. */
  waitFor(pred: () => boolean, ms: number, signal?: AbortSignal): Promise<boolean> {
    if (pred()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const w: Waiter = { pred, resolve: () => { clearTimeout(timer); resolve(true); } };
      const timer = setTimeout(() => { this.waiters = this.waiters.filter((x) => x !== w); resolve(false); }, ms);
      signal?.addEventListener('abort', () => { clearTimeout(timer); this.waiters = this.waiters.filter((x) => x !== w); resolve(false); }, { once: true });
      this.waiters.push(w);
    });
  }

  /** Merge-patches status.agent (the only part of the status an agent writes). */
  async patchAgent(agent: Record<string, unknown>): Promise<void> {
    this.requests++;
    await this.api.patchNamespacedCustomObjectStatus(
      { group: GROUP, version: VERSION, namespace: this.namespace, plural: 'agentsessions', name: this.name, body: { status: { agent } }, fieldManager: FIELD_MANAGER },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
  }

  /** Reads the AgentSession and merge-patches its spec with a user's kubeconfig (/plan). */
  static async patchSpecAs(kubeconfigPath: string | undefined, namespace: string, name: string,
    body: (s: AgentSession) => Record<string, unknown>): Promise<void> {
    const kc = new k8s.KubeConfig();
    if (kubeconfigPath) kc.loadFromFile(kubeconfigPath); else kc.loadFromDefault();
    const api = kc.makeApiClient(k8s.CustomObjectsApi);
    const ref = { group: GROUP, version: VERSION, namespace, plural: 'agentsessions', name };
    // The patch carries the resourceVersion it was computed from: a concurrent writer makes it
    // conflict (409), and it is computed again from a fresh read.
    for (let attempt = 0; ; attempt++) {
      const s = (await api.getNamespacedCustomObject(ref)) as AgentSession;
      try {
        await api.patchNamespacedCustomObject({ ...ref, body: body(s), fieldManager: 'planmode-harness-user' },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
        return;
      } catch (e) {
        if ((e as { code?: number }).code !== 409 || attempt >= 4) throw e;
      }
    }
  }

  stop(): void {
    this.stopped = true;
    for (const a of this.aborts) a.abort();
  }
}
