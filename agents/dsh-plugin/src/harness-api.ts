// The parts of the harness's runtime (dsh rc.8) this plugin touches, typed from its packages'
// declarations (dsh-agent, dsh-session, dsh-system-prompt, dsh-tools, dsh-commands,
// dsh-user-questions, dsh-attachment): only the members the plugin reads or calls.
import type { LogEvent } from './events.js';

/** A content block of a message: text, or an image held by the attachment service. */
export type ContentBlock = { type: 'text'; text: string } | { type: 'image'; attachment: ImageAttachmentRef };

/** dsh-attachment's reference to stored image bytes (its content address is sha256:<hex>). */
export interface ImageAttachmentRef { attachmentId: string; mediaType: string; width: number; height: number; bytes: number; name?: string }

/** A user message as dsh-llm's createUserMessage builds it. */
export interface UserMessage { readonly id: string; readonly content: readonly ContentBlock[]; readonly source: { kind: string } }

/** dsh-session's creation header. */
export interface SessionHeader {
  readonly version: number;
  readonly id: string;
  readonly createdAt: number;
  readonly cwd?: string;
  readonly parentSession?: string;
  readonly seedLength?: number;
  readonly origin?: string;
  readonly delegationDepth?: number;
  readonly agentPreset?: string;
}

/** dsh-session's Session: the in-memory log, numbered as it is appended. */
export interface HarnessSession {
  readonly id: string;
  /** The seq the next event gets. */
  readonly seq: number;
  readonly events: readonly LogEvent[];
  readonly header: SessionHeader;
  append(type: string, data: unknown): LogEvent;
}

/** A context scoped to one agent (agent.ctx): registrations made through it are that agent's. */
export interface AgentScope {
  readonly tools: ToolRegistry;
}

/** dsh-agent's Agent. */
export interface Agent {
  readonly id: string;
  readonly session: HarnessSession;
  readonly status: 'idle' | 'running';
  readonly ctx: AgentScope;
  followup(message: UserMessage): void;
  steer(message: UserMessage): void;
  whenIdle(): Promise<void>;
}

/** dsh-system-prompt's assembly, as the system-prompt/assemble waterfall passes it. */
export interface PromptAssembly {
  readonly sections: readonly { name: string; text: string }[];
  readonly tools: readonly { name: string }[];
  readonly [key: string]: unknown;
}

/** The assemble context: the agent, its scope, and the turn's signal. */
export interface AssembleContext { readonly agent?: Agent; readonly scope?: Agent; readonly signal?: AbortSignal }

/** agent/pre-step's payload and decision. */
export interface PreStepPayload { readonly agent: Agent; readonly turn: number; readonly step: number; readonly signal: AbortSignal }
export type PreStepDecision = { kind: 'reject' } | { kind: 'enter'; messages: readonly unknown[] };

/** A tool's execution context (dsh-tools ToolExecution), the parts the exit tool reads. */
export interface ToolExecution { readonly agent?: Agent; readonly signal: AbortSignal; concludeTurn(): void }

/** A tool definition as defineTool builds it (opaque to this plugin). */
export type ToolDefinition = { readonly name: string };

/** dsh-tools' registry. */
export interface ToolRegistry {
  register(definition: ToolDefinition): () => void;
}

/** dsh-system-prompt's registry. */
export interface SystemPromptRegistry {
  section(section: { name: string; order: number; text: (context: AssembleContext) => string }): () => void;
  assemble(context: AssembleContext): Promise<PromptAssembly>;
}

/** One question of a user-questions request; a plan review carries the plan in detail. */
export interface UserQuestion {
  readonly id: string;
  readonly header?: string;
  readonly question: string;
  readonly detail?: string;
  readonly options?: readonly { label: string; description?: string }[];
  readonly intent?: { kind: string; approve: string };
}
export interface UserQuestionRequest { readonly questions: readonly UserQuestion[]; readonly agent?: Agent; readonly signal?: AbortSignal }
export interface UserAnswers { answers: { id: string; selected: string[]; custom?: string }[] }
export interface UserQuestionProvider { ask(request: UserQuestionRequest): Promise<UserAnswers> }
export interface UserQuestions {
  ask(request: UserQuestionRequest): Promise<UserAnswers>;
  registerProvider(provider: UserQuestionProvider): () => void;
}

/** dsh-commands' invocation and result. */
export interface CommandInvocation { readonly agent: Agent; readonly rawInput: string; readonly attachments: readonly ContentBlock[] }
export type CommandResult = { kind: 'success' | 'error'; text: string };
export interface CommandRegistry {
  register(command: {
    name: string; description: string; input: { hint: string; images: boolean };
    handler: (invocation: CommandInvocation) => Promise<CommandResult>;
  }): () => void;
}

/** dsh-attachment's store. */
export interface AttachmentStore {
  saveImages(inputs: { data: Uint8Array; mediaType: string; name?: string }[]): Promise<ImageAttachmentRef[]>;
  readImage(ref: ImageAttachmentRef, signal?: AbortSignal): Promise<{ ref: ImageAttachmentRef; data: Uint8Array }>;
}

/** dsh-agent's registry. */
export interface AgentRegistry {
  create(options: { sessionId: string; meta: { cwd: string }; agentOptions: unknown; setup: (ctx: unknown) => void }): Promise<{ agent: Agent }>;
  resume(options: { resumeSessionId: string; agentOptions: unknown; setup: (ctx: unknown) => void }): Promise<{ agent: Agent }>;
  roots(): Agent[];
}

/** The model route the deployment selected (dsh-agent-default-model). */
export interface ModelSelection { readonly provider: string; readonly model: string }

/** The plugin's Cordis context, with the services named in its inject list. */
export interface PluginContext {
  readonly systemPrompt: SystemPromptRegistry;
  readonly tools: ToolRegistry;
  readonly sessions: { flush(session: HarnessSession): Promise<void> };
  readonly agents: AgentRegistry;
  readonly agentDefaultModel: { currentSelection(): ModelSelection };
  readonly logger?: { info?(msg: string, ...args: unknown[]): void; warn?(msg: string, ...args: unknown[]): void };
  on(event: 'system-prompt/assemble', listener: (assembly: PromptAssembly, context: AssembleContext, next: () => Promise<PromptAssembly>) => Promise<PromptAssembly>): () => void;
  on(event: 'agent/pre-step', listener: (payload: PreStepPayload, next: () => Promise<PreStepDecision>) => Promise<PreStepDecision>): () => void;
  on(event: 'session/event', listener: (session: HarnessSession, event: LogEvent) => void): () => void;
  on(event: 'agent/created', listener: (payload: { agent: Agent }) => void): () => void;
  on(event: 'agent/status', listener: (payload: { agent?: Agent }) => void): () => void;
  on(event: 'dispose', listener: () => void): () => void;
  get(name: 'userQuestions'): UserQuestions | undefined;
  get(name: 'attachments'): AttachmentStore | undefined;
  get(name: 'appExit'): ((code: number) => void) | undefined;
  get(name: 'loader'): { await(): Promise<void> } | undefined;
  inject(deps: ['commands'], fn: (ctx: { commands: CommandRegistry }) => void): void;
}
