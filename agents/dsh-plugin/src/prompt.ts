// What plan mode puts into a step's request, for every agent of the process: the plan:policy
// section at order 50 (where the stock plan-mode plugin places it) and exit_plan_mode, both
// from the agent's committed plan state, the fold of its own log. The tool is admitted by one
// rule for native and Code Mode: it is registered in the agent's own scope exactly while that
// agent's plan state is active, so the registry itself leaves it out of the native tool list,
// the Code Mode SDK and execution, and a call outside plan mode gets the harness's own
// unknown-tool answer.
//
// The root agent's boundary runs in the system-prompt/assemble waterfall, after the sections
// and tools were evaluated; when it commits a change, the step's assembly is built again, so
// the request is the one the harness builds for that state.
import type { Agent, AssembleContext, HarnessSession, PluginContext, PromptAssembly, ToolDefinition } from './harness-api.js';
import type { Tails } from './session.js';

/** The name and order of the plan guidance section (dsh-plan-mode). */
export const PLAN_SECTION = 'plan:policy';
export const PLAN_SECTION_ORDER = 50;

export interface PromptDeps {
  tails: Tails;
  /** The PlanModeConfig's section in force, undefined when none was ever seen. */
  sectionText: () => string | undefined;
  exitTool: ToolDefinition;
  /**
   * Runs the root agent's step boundary when agent is the root and a step is being proposed;
   * resolves once the step's plan state is decided. Other agents: nothing.
   */
  boundary: (agent: Agent, context: AssembleContext) => Promise<void>;
}

export class PlanPrompt {
  private readonly admitted = new WeakMap<Agent, () => void>();
  private readonly agentOf = new WeakMap<HarnessSession, Agent>();
  private readonly reassembling = new WeakSet<Agent>();

  constructor(private readonly ctx: PluginContext, private readonly d: PromptDeps) {}

  install(): void {
    this.ctx.systemPrompt.section({
      name: PLAN_SECTION,
      order: PLAN_SECTION_ORDER,
      text: (context) => (context.agent !== undefined && this.active(context.agent) ? this.d.sectionText() ?? '' : ''),
    });
    this.ctx.on('agent/created', ({ agent }) => this.track(agent));
    // A plan/mode appended to a session (mirrored from the store for the root) changes what its
    // agent admits at once: the next assembly already has it.
    this.ctx.on('session/event', (session, event) => {
      if (event.type !== 'plan/mode') return;
      const agent = this.agentOf.get(session);
      if (agent) this.sync(agent);
    });
    this.ctx.on('system-prompt/assemble', (assembly, context, next) => this.assemble(assembly, context, next));
  }

  /** Starts following agent's plan state (every agent the harness creates or resumes). */
  track(agent: Agent): void {
    this.agentOf.set(agent.session, agent);
    this.sync(agent);
  }

  private active(agent: Agent): boolean { return this.d.tails.of(agent.session).active; }

  /** Registers or withdraws agent's exit_plan_mode to match its plan state. */
  private sync(agent: Agent): void {
    const on = this.active(agent);
    const dispose = this.admitted.get(agent);
    if (on && dispose === undefined) this.admitted.set(agent, agent.ctx.tools.register(this.d.exitTool));
    if (!on && dispose !== undefined) {
      this.admitted.delete(agent);
      dispose();
    }
  }

  private async assemble(_assembly: PromptAssembly, context: AssembleContext, next: () => Promise<PromptAssembly>): Promise<PromptAssembly> {
    const agent = context.agent;
    if (agent === undefined || this.reassembling.has(agent)) return next();
    const out = await next();
    const before = this.active(agent);
    await this.d.boundary(agent, context);
    if (this.active(agent) === before) return out;
    // The boundary committed a change: sections and tools were evaluated for the old state.
    this.reassembling.add(agent);
    try {
      return await this.ctx.systemPrompt.assemble(context);
    } finally {
      this.reassembling.delete(agent);
    }
  }
}
