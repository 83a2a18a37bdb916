// The user-questions provider of the harness: a plan review (the question exit_plan_mode
// asks) goes to the AgentSession, status.agent.review, and its decision comes from the
// manager's status.review (kubectl plan approve, revise, dismiss). The review must be open
// (posted and named by status.review) within PLANMODE_REVIEW_OPEN_WAIT_MS, and the watch must
// not be lost for longer than that while it waits: otherwise nobody can answer (the API server
// or the manager is away) and the call fails with the harness's no-channel text. Other
// questions get the seam's answer for a deployment without a provider: the harness has no
// terminal to ask them at.
import { randomUUID } from 'node:crypto';
import type { PluginConfig } from './config.js';
import type { HarnessModules } from './harness.js';
import type { UserAnswers, UserQuestionProvider, UserQuestionRequest } from './harness-api.js';
import { NotTakenInTime, type SessionWatch } from './kube.js';
import type { Tails } from './session.js';
import { ExitErrAborted, ExitErrNoChannel, ExitErrNotInPlanMode, ExitErrReviewExpired, ExitKeepPlanningGeneric } from './texts.js';
import { APPROVE_LABEL, ASK_CANCELLED, KEEP_PLANNING_LABEL, REVIEW_ID } from './exit-tool.js';

/** dsh-user-questions' text and code for a deployment with no provider. */
const NO_PROVIDER = 'no user-questions provider is registered';

type ReviewState = { id: string; phase: string; message?: string };

export class ReviewProvider implements UserQuestionProvider {
  constructor(private readonly watch: SessionWatch, private readonly cfg: PluginConfig, private readonly mods: HarnessModules,
    private readonly tails: Tails, private readonly log: (msg: string, ...args: unknown[]) => void) {}

  async ask(request: UserQuestionRequest): Promise<UserAnswers> {
    const q = request.questions.find((x) => x.id === REVIEW_ID && x.intent?.kind === 'plan-review');
    if (q === undefined || request.questions.length !== 1 || q.detail === undefined || request.agent === undefined) {
      throw new this.mods.UserQuestionError(NO_PROVIDER, 'NO_PROVIDER');
    }
    const id = randomUUID();
    const turn = this.tails.of(request.agent.session).turn;
    const signal = request.signal;
    const opened = (s: ReviewState | undefined) => s !== undefined && s.id === id;
    const openBy = Date.now() + this.cfg.reviewOpenWaitMs;
    try {
      await this.watch.patchAgent({ review: { id, plan: q.detail, turn, requestedAt: new Date().toISOString() } }, this.cfg.reviewOpenWaitMs, signal);
    } catch (e) {
      if (signal?.aborted) throw new this.mods.UserQuestionError(ExitErrAborted, 'ASK_ABORTED');
      if (e instanceof NotTakenInTime) return this.noChannel(id, e.message);
      throw e;
    }
    if (!(await this.watch.waitFor(() => opened(this.review()), Math.max(0, openBy - Date.now()), signal))) {
      if (signal?.aborted) return this.withdraw(id, new this.mods.UserQuestionError(ExitErrAborted, 'ASK_ABORTED'));
      return this.noChannel(id, `the manager did not open the review within ${this.cfg.reviewOpenWaitMs} ms`);
    }
    const decided = () => { const r = this.review(); return r !== undefined && opened(r) && r.phase !== 'Pending'; };
    const waitBy = Date.now() + this.cfg.reviewWaitMs;
    // Waits for the decision, in slices so a watch lost for longer than the open bound ends it.
    while (!decided()) {
      const left = waitBy - Date.now();
      if (left <= 0 || signal?.aborted) return this.withdraw(id, new this.mods.UserQuestionError(ExitErrAborted, 'ASK_ABORTED'));
      const lost = this.watch.lostSince;
      if (lost !== undefined && Date.now() - lost > this.cfg.reviewOpenWaitMs) return this.noChannel(id, `the AgentSession's watch has been lost since ${new Date(lost).toISOString()}`);
      await this.watch.waitFor(decided, Math.min(left, this.cfg.reviewOpenWaitMs), signal);
    }
    const r = this.review()!;
    switch (r.phase) {
      case 'Approved': return { answers: [{ id: REVIEW_ID, selected: [APPROVE_LABEL] }] };
      case 'KeepPlanning': {
        // The manager's message is the whole keep-planning text: with feedback it already
        // quotes it.
        const feedback = r.message && r.message !== ExitKeepPlanningGeneric ? r.message : undefined;
        if (feedback === undefined) return { answers: [{ id: REVIEW_ID, selected: [KEEP_PLANNING_LABEL] }] };
        throw new Error(feedback);
      }
      case 'Dismissed': throw new this.mods.UserQuestionError(r.message || 'the user dismissed the review', ASK_CANCELLED);
      case 'Expired': throw new Error(r.message || ExitErrReviewExpired);
      default: throw new Error(r.message || ExitErrNotInPlanMode);
    }
  }

  private review(): ReviewState | undefined { return this.watch.get()?.status?.review; }

  /** Withdraws the posted review (nobody may approve a plan nobody waits for), then fails. */
  private async withdraw(id: string, why: Error): Promise<never> {
    if (this.watch.get()?.status?.agent?.review?.id === id) {
      await this.watch.patchAgent({ review: null }, this.cfg.reviewOpenWaitMs).catch((e: Error) => this.log('withdraw plan review %s: %s', id, e.message));
    }
    throw why;
  }

  private noChannel(id: string, why: string): Promise<never> {
    this.log('exit_plan_mode: no reviewer can be reached (%s)', why);
    return this.withdraw(id, new Error(ExitErrNoChannel));
  }
}
