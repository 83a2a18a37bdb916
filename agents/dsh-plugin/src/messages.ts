// The user's messages of spec.steerQueue (docs/protocol.md section 10) into the root agent: an
// idle agent starts a turn for them (under the between-turns lock), a running one gets them as
// its next step's input; status.agent.steerID once they are in the store (log first, status
// second). A message's images are delivered as the harness records an image message: its
// bytes (the image's ConfigMap, checked against the content address) saved through the
// harness's attachment service, one image block each ahead of the text.
import type { PluginConfig } from './config.js';
import { pendingMessages } from './decide.js';
import type { HarnessModules } from './harness.js';
import type { Agent, ContentBlock, PluginContext, UserMessage } from './harness-api.js';
import type { SessionWatch, SteerMessage } from './kube.js';
import type { LogStore } from './log-store.js';
import type { StoreLock } from './lock.js';
import type { RootSession } from './session.js';

export interface DeliveryDeps {
  ctx: PluginContext;
  mods: HarnessModules;
  root: RootSession;
  watch: SessionWatch;
  store: LogStore;
  lock: StoreLock;
  cfg: PluginConfig;
  log: (msg: string, ...args: unknown[]) => void;
  /** Resolves at the next event the harness appends to session. */
  nextEvent: (agent: Agent) => Promise<void>;
}

export class MessageDelivery {
  constructor(private readonly d: DeliveryDeps) {}

  /**
   * Mirrors a plan/mode the manager committed between turns as soon as its status says so,
   * under the between-turns lock: the harness's next event typed between turns (a command's
   * command/run, which no hook precedes) then takes the seq after it. A command typed before
   * the watch delivers that status still meets the log the harness has in memory
   * (docs/agents.md, "Not done yet").
   */
  async catchUpIdle(): Promise<void> {
    const { root, watch, lock, store } = this.d;
    const next = watch.get()?.status?.planMode?.nextSeq ?? 0;
    if (root.tail().turnOpen || lock.holding || next <= root.session.seq) return;
    const release = await lock.hold(root.id);
    try {
      if (root.tail().turnOpen) return;
      await root.catchUp(store);
    } finally {
      await lock.unlock(release);
    }
    process.stdout.write(JSON.stringify({ op: 'caught-up', seq: root.session.seq }) + '\n');
  }

  /** Takes the messages not recorded yet, in order. */
  async deliver(): Promise<void> {
    const { root, watch } = this.d;
    const s = watch.get();
    if (!s) return;
    await this.catchUpIdle();
    const msgs = pendingMessages(s, root.lastRecorded);
    if (msgs.length === 0) return;
    const built = await Promise.all(msgs.map((m) => this.message(m)));
    // An open turn takes them as steering; otherwise a turn starts for them, under the
    // between-turns lock (also when the agent is still closing its last turn: the followup
    // then waits for the next one).
    const running = root.tail().turnOpen;
    if (running) for (const m of built) root.agent.steer(m);
    else await this.startTurn(built);
    const last = msgs[msgs.length - 1]!;
    root.lastRecorded = last.id;
    process.stdout.write(JSON.stringify({ op: 'messages', ids: msgs.map((m) => m.id), running }) + '\n');
    void this.acknowledge(last.id, built[built.length - 1]!);
  }

  /** The user/message the harness records for m. */
  private async message(m: SteerMessage): Promise<UserMessage> {
    const content: ContentBlock[] = [];
    for (const img of m.images ?? []) {
      const block = await this.image(m.id, img);
      if (block) content.push(block);
    }
    if (m.text || content.length === 0) content.push({ type: 'text', text: m.text ?? '' });
    return this.d.mods.createUserMessage({ content, source: { kind: 'user' } });
  }

  private async image(id: string, img: NonNullable<SteerMessage['images']>[number]): Promise<ContentBlock | undefined> {
    const store = this.d.ctx.get('attachments');
    try {
      if (store === undefined) throw new Error('the harness composes no attachment store');
      const data = await this.d.watch.imageData(img, this.d.cfg.apiCallMs);
      const [ref] = await store.saveImages([{ data, mediaType: img.mediaType, ...(img.name ? { name: img.name } : {}) }]);
      if (ref === undefined || ref.attachmentId !== img.attachmentId) throw new Error(`the attachment store addressed it as ${ref?.attachmentId}`);
      return { type: 'image', attachment: ref };
    } catch (e) {
      // The text still goes to the model, as an agent older than images would send it.
      this.d.log('message %s: image %s left out: %s', id, img.attachmentId, (e as Error).message);
      return undefined;
    }
  }

  /**
   * Between turns (docs/protocol.md section 15): take the store's write lock, mirror what the
   * manager stored since the harness's last event, start the turn and release the lock once
   * its turn/start is stored. The manager's between-turns commit waits on the lock and then
   * finds the turn open, so its selection goes to the turn's first boundary instead.
   */
  private async startTurn(messages: UserMessage[]): Promise<void> {
    const { root, lock, store, ctx } = this.d;
    lock.releaseNow();
    const release = await lock.hold(root.id);
    try {
      await root.catchUp(store);
      const before = root.session.seq;
      root.agent.followup(messages[0]!);
      for (const m of messages.slice(1)) root.agent.steer(m);
      const started = () => root.session.events.slice(before).some((e) => e.type === 'turn/start');
      while (!started() && root.agent.status === 'running') await Promise.race([this.d.nextEvent(root.agent), root.agent.whenIdle()]);
      await ctx.sessions.flush(root.session);
    } finally {
      await lock.unlock(release);
    }
  }

  /**
   * status.agent.steerID once the message is in the store. A turn that ended before recording
   * it (its proposal failed: the harness drops a blocked turn's claimed input) takes it too.
   */
  private async acknowledge(id: string, last: UserMessage): Promise<void> {
    const { root, watch, ctx } = this.d;
    const recorded = () => root.session.events.some((e) => e.type === 'user/message' && (e.data as { id?: unknown })?.id === last.id);
    // Wait on the harness's own events; an idle agent will record nothing more.
    while (!recorded() && root.agent.status === 'running') await Promise.race([this.d.nextEvent(root.agent), root.agent.whenIdle()]);
    await ctx.sessions.flush(root.session);
    if (root.lastRecorded !== id) return; // a later batch acknowledges
    await watch.patchAgent({ steerID: id }, this.d.cfg.apiCallMs).catch((e: Error) => this.d.log('acknowledge message %s: %s', id, e.message));
  }
}
