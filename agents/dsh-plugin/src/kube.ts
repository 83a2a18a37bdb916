// One watch of the agent's AgentSession (fieldSelector metadata.name) and one of its
// namespace's PlanModeConfigs, through @kubernetes/client-node (docs/protocol.md section 4).
// Every protocol read comes from this cache: no API read per step. Writes are merge patches
// of status.agent with field manager planmode-agent, only when something is to be said, each
// bounded by the caller's deadline and sent again while the API server answers 5xx or 429
// (as the Go SDK's, pkg/apiretry).
import { createHash } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import type { ImageAttachmentRef } from './harness-api.js';

export const GROUP = 'agents.harness.dev';
export const VERSION = 'v1alpha1';
const FIELD_MANAGER = 'planmode-agent';

// Only the fields this plugin reads.
export interface Boundary { turn: number; step: number; seq: number; time?: string }
export interface LastBoundary extends Boundary { result: 'Admitted' | 'Failed' | 'Dismissed'; active?: boolean; nextSeq?: number; notice?: string; reason?: string; message?: string }
/** A user message of spec.steerQueue: text, images (kubectl plan message --image), or both. */
export interface SteerMessage { id: string; text?: string; images?: ImageAttachmentRef[] }
export interface AgentSession {
  metadata: { name: string; namespace: string; uid: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec: {
    sessionID: string;
    planMode?: { active?: boolean; configRef?: { name?: string } };
    steerQueue?: SteerMessage[];
    fork?: { sessionID: string; throughSeq?: number };
  };
  status?: {
    planMode?: {
      active?: boolean; pending?: boolean; pendingActive?: boolean; selection?: boolean; nextSeq?: number; storeID?: string;
      notice?: { seq: number; text: string }; lastBoundary?: LastBoundary; queuedInTurn?: number; config?: { name?: string };
    };
    agent?: { boundary?: Boundary; steerID?: string; review?: { id: string } };
    review?: { id: string; phase: string; message?: string };
  };
}

/** The ConfigMap an attached image's bytes are in (api/v1alpha1 ImageConfigMapName). */
export function imageConfigMapName(attachmentId: string): string {
  return 'plan-image-' + attachmentId.replace(/^sha256:/, '');
}
/** The key of the image's bytes in it (api/v1alpha1 ImageDataKey). */
export const IMAGE_DATA_KEY = 'image';

/** The content address of bytes, as attachment ids carry it. */
export function attachmentIdOf(data: Uint8Array): string {
  return 'sha256:' + createHash('sha256').update(data).digest('hex');
}

/** A write the API server did not take before the caller's deadline. */
export class NotTakenInTime extends Error {
  constructor(what: string, ms: number, readonly last?: Error) {
    super(`${what}: the API server did not take it within ${ms} ms${last ? ` (${last.message})` : ''}`);
    this.name = 'NotTakenInTime';
  }
}

/** Whether a failed API call may be sent again: 5xx, 429, or no answer at all. */
export function transient(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  return typeof code !== 'number' || code >= 500 || code === 429;
}

// The first and longest pause before a write the API server did not take is sent again
// (pkg/agentsdk's reportRetryDelay and reportRetryDelayMax).
const RETRY_FIRST_MS = 100;
const RETRY_LONGEST_MS = 5000;

/**
 * call(signal) until it succeeds, fails for good, or ms pass: the signal aborts the request in
 * flight at the deadline. A call still failing then is NotTakenInTime.
 */
export async function within<T>(what: string, ms: number, call: (signal: AbortSignal) => Promise<T>, outer?: AbortSignal): Promise<T> {
  const deadline = Date.now() + ms;
  let last: Error | undefined;
  for (let delay = RETRY_FIRST_MS; ; delay = Math.min(2 * delay, RETRY_LONGEST_MS)) {
    const left = deadline - Date.now();
    if (left <= 0 || outer?.aborted) throw new NotTakenInTime(what, ms, last);
    const signal = outer ? AbortSignal.any([outer, AbortSignal.timeout(left)]) : AbortSignal.timeout(left);
    try {
      return await call(signal);
    } catch (e) {
      last = e as Error;
      if (!signal.aborted && !transient(e)) throw e;
    }
    const pause = Math.min(delay * (0.5 + Math.random()), deadline - Date.now());
    if (pause > 0) await new Promise((r) => setTimeout(r, pause));
  }
}

/** ConfigurationOptions that send a request with signal (client-node's fetch honours it). */
function withSignal(signal: AbortSignal | undefined, opt: k8s.ConfigurationOptions = {}): k8s.ConfigurationOptions {
  if (!signal) return opt;
  const mw: k8s.ObservableMiddleware = {
    pre: (ctx) => { ctx.setSignal(signal); return new k8s.Observable(Promise.resolve(ctx)); },
    post: (ctx) => new k8s.Observable(Promise.resolve(ctx)),
  };
  return { ...opt, middleware: [...(opt.middleware ?? []), mw], middlewareMergeStrategy: 'append' };
}
export interface PlanModeConfig { metadata: { name: string; generation?: number }; spec: { section: string } }

type Waiter = { pred: () => boolean; resolve: () => void };

export class SessionWatch {
  private readonly kc: k8s.KubeConfig;
  private readonly api: k8s.CustomObjectsApi;
  private readonly core: k8s.CoreV1Api;
  private readonly watch: k8s.Watch;
  private session?: AgentSession;
  private readonly configs = new Map<string, PlanModeConfig>();
  private readonly aborts: AbortController[] = [];
  private waiters: Waiter[] = [];
  private stopped = false;
  /** API requests this process sent (lists, watches, patches): the benchmark reads it. */
  requests = 0;
  /** Since when the AgentSession's watch has been down (undefined while it runs). */
  lostSince?: number;
  onChange?: () => void;

  constructor(readonly namespace: string, readonly name: string, kc?: k8s.KubeConfig) {
    this.kc = kc ?? new k8s.KubeConfig();
    if (!kc) this.kc.loadFromDefault();
    this.api = this.kc.makeApiClient(k8s.CustomObjectsApi);
    this.core = this.kc.makeApiClient(k8s.CoreV1Api);
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
    }, (err) => {
      if (this.stopped) return;
      if (err && plural === 'agentsessions') this.lostSince ??= Date.now();
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
    }).then((a) => {
      this.aborts.push(a);
      if (plural === 'agentsessions') this.lostSince = undefined;
    }, () => {
      if (plural === 'agentsessions') this.lostSince ??= Date.now();
      setTimeout(() => this.run(plural, last, fieldSelector, apply), 1000);
    });
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

  /**
   * Merge-patches status.agent (the only part of the status an agent writes), within ms: sent
   * again while the API server answers 5xx or 429; NotTakenInTime once ms have passed.
   */
  async patchAgent(agent: Record<string, unknown>, ms: number, outer?: AbortSignal): Promise<void> {
    await within('patch status.agent', ms, async (signal) => {
      this.requests++;
      await this.api.patchNamespacedCustomObjectStatus(
        { group: GROUP, version: VERSION, namespace: this.namespace, plural: 'agentsessions', name: this.name, body: { status: { agent } }, fieldManager: FIELD_MANAGER },
        withSignal(signal, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch)),
      );
    }, outer);
  }

  /**
   * The bytes of an attached image, from its ConfigMap, checked against its content address (a
   * replaced object is an error, not another image), within ms.
   */
  async imageData(img: ImageAttachmentRef, ms: number): Promise<Uint8Array> {
    const name = imageConfigMapName(img.attachmentId);
    const cm = await within(`read image ${img.attachmentId}`, ms, (signal) => this.core.readNamespacedConfigMap({ name, namespace: this.namespace }, withSignal(signal)));
    const b64 = cm.binaryData?.[IMAGE_DATA_KEY];
    const data = new Uint8Array(Buffer.from(b64 ?? '', 'base64'));
    if (b64 === undefined || attachmentIdOf(data) !== img.attachmentId) {
      throw new Error(`ConfigMap ${this.namespace}/${name} does not hold image ${img.attachmentId} (its bytes have another digest)`);
    }
    return data;
  }

  stop(): void {
    this.stopped = true;
    for (const a of this.aborts) a.abort();
  }
}

/** The field manager of the writes /plan makes as the user. */
const USER_FIELD_MANAGER = 'planmode-harness-user';

/**
 * The user's writes of /plan typed in the harness: the AgentSession's spec, and the ConfigMaps
 * of attached images, with the user's kubeconfig (PLANMODE_USER_KUBECONFIG), each bounded.
 */
export class UserWrites {
  private readonly api: k8s.CustomObjectsApi;
  private readonly core: k8s.CoreV1Api;

  constructor(kubeconfigPath: string | undefined, readonly namespace: string, readonly name: string, private readonly ms: number) {
    const kc = new k8s.KubeConfig();
    if (kubeconfigPath) kc.loadFromFile(kubeconfigPath); else kc.loadFromDefault();
    this.api = kc.makeApiClient(k8s.CustomObjectsApi);
    this.core = kc.makeApiClient(k8s.CoreV1Api);
  }

  /** Reads the AgentSession and merge-patches its spec with body's patch of what it read. */
  async patchSpec(body: (s: AgentSession) => Record<string, unknown>): Promise<void> {
    const ref = { group: GROUP, version: VERSION, namespace: this.namespace, plural: 'agentsessions', name: this.name };
    // The patch carries the resourceVersion it was computed from: a concurrent writer makes it
    // conflict (409), and it is computed again from a fresh read.
    for (let attempt = 0; ; attempt++) {
      const s = (await within('read the AgentSession', this.ms, (signal) => this.api.getNamespacedCustomObject(ref, withSignal(signal)))) as AgentSession;
      try {
        await within('patch the AgentSession', this.ms, (signal) => this.api.patchNamespacedCustomObject({ ...ref, body: body(s), fieldManager: USER_FIELD_MANAGER },
          withSignal(signal, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch))));
        return;
      } catch (e) {
        if ((e as { code?: number }).code !== 409 || attempt >= 4) throw e;
      }
    }
  }

  /**
   * Stores an image's bytes in its ConfigMap (immutable, owned by the session), as kubectl plan
   * message --image does; one the same bytes already made gets the session as another owner.
   */
  async storeImage(session: AgentSession, img: ImageAttachmentRef, data: Uint8Array): Promise<void> {
    const name = imageConfigMapName(img.attachmentId);
    const owner = { apiVersion: `${GROUP}/${VERSION}`, kind: 'AgentSession', name: session.metadata.name, uid: session.metadata.uid };
    const body: k8s.V1ConfigMap = {
      metadata: { name, namespace: this.namespace, labels: { 'agents.harness.dev/attachment': 'image', 'app.kubernetes.io/managed-by': USER_FIELD_MANAGER }, ownerReferences: [owner] },
      binaryData: { [IMAGE_DATA_KEY]: Buffer.from(data).toString('base64') },
      immutable: true,
    };
    try {
      await within(`store image ${img.attachmentId}`, this.ms, (signal) => this.core.createNamespacedConfigMap({ namespace: this.namespace, body, fieldManager: USER_FIELD_MANAGER }, withSignal(signal)));
      return;
    } catch (e) {
      if ((e as { code?: number }).code !== 409) throw e;
    }
    for (let attempt = 0; ; attempt++) {
      const have = await within(`read image ${img.attachmentId}`, this.ms, (signal) => this.core.readNamespacedConfigMap({ name, namespace: this.namespace }, withSignal(signal)));
      if (attachmentIdOf(new Uint8Array(Buffer.from(have.binaryData?.[IMAGE_DATA_KEY] ?? '', 'base64'))) !== img.attachmentId) {
        throw new Error(`ConfigMap ${this.namespace}/${name} holds other bytes than image ${img.attachmentId}; delete it and send the image again`);
      }
      const owners = have.metadata?.ownerReferences ?? [];
      if (owners.some((o) => o.uid === owner.uid)) return;
      try {
        await within(`own image ${img.attachmentId}`, this.ms, (signal) => this.core.patchNamespacedConfigMap(
          { name, namespace: this.namespace, body: { metadata: { resourceVersion: have.metadata?.resourceVersion, ownerReferences: [...owners, owner] } }, fieldManager: USER_FIELD_MANAGER },
          withSignal(signal, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch))));
        return;
      } catch (e) {
        if ((e as { code?: number }).code !== 409 || attempt >= 4) throw e;
      }
    }
  }
}
