// The harness's own packages, resolved from the dsh installation that loaded this plugin (not
// from this package's node_modules): the plugin must use the very classes the running harness
// uses (its persistence base class, message and tool builders). PLANMODE_DSH_ROOT names the
// installation when dsh was not started through its own bin (process.argv[1]).
import { realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ContentBlock, ModelSelection, ToolDefinition, ToolExecution, UserMessage } from './harness-api.js';

function harnessRequire(): NodeJS.Require {
  const root = process.env.PLANMODE_DSH_ROOT;
  if (root) return createRequire(join(root, 'node_modules', 'package.json'));
  const main = process.argv[1];
  if (!main) throw new Error('dsh-plugin: cannot find the harness installation: set PLANMODE_DSH_ROOT to the directory holding node_modules/@deepseek-ai/dsh');
  return createRequire(realpathSync(main));
}

/** Imports one of the harness's packages (ESM) by name. */
export async function importHarness<T = Record<string, unknown>>(name: string): Promise<T> {
  const req = harnessRequire();
  let path: string;
  try {
    path = req.resolve(name);
  } catch (e) {
    throw new Error(`dsh-plugin: the harness package ${name} is not installed beside dsh (${(e as Error).message}); install the pinned harness with make harness`);
  }
  return (await import(pathToFileURL(path).href)) as T;
}

/** The harness's module functions and classes the plugin calls, resolved once. */
export interface HarnessModules {
  createUserMessage(m: { content: readonly ContentBlock[]; source: Record<string, unknown> }): UserMessage;
  defineTool(spec: ToolSpec): ToolDefinition;
  SessionId(id: string): string;
  installModelSelection(agentCtx: unknown, selection: { current: ModelSelection; assembled: undefined }): void;
  UserQuestionError: new (message: string, code: string) => Error & { code: string };
}

/** What defineTool takes for exit_plan_mode (dsh-tools DefineToolOptions, the fields used). */
export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, { type: 'string'; required: boolean; description: string }>;
  output: { schema: Record<string, unknown>; render: (args: unknown, value: { approved?: boolean } | undefined) => ContentBlock[] };
  execute: (args: { plan: string }, exec: ToolExecution) => Promise<{ approved: boolean }>;
  presentCall?: (args: { plan: string }) => unknown;
}

export async function loadHarnessModules(): Promise<HarnessModules> {
  const [llm, tools, session, agent, questions] = await Promise.all([
    importHarness<Pick<HarnessModules, 'createUserMessage'>>('@deepseek-ai/dsh-llm'),
    importHarness<Pick<HarnessModules, 'defineTool'>>('@deepseek-ai/dsh-tools'),
    importHarness<Pick<HarnessModules, 'SessionId'>>('@deepseek-ai/dsh-session'),
    importHarness<Pick<HarnessModules, 'installModelSelection'>>('@deepseek-ai/dsh-agent'),
    importHarness<Pick<HarnessModules, 'UserQuestionError'>>('@deepseek-ai/dsh-user-questions'),
  ]);
  return {
    createUserMessage: llm.createUserMessage, defineTool: tools.defineTool, SessionId: session.SessionId,
    installModelSelection: agent.installModelSelection, UserQuestionError: questions.UserQuestionError,
  };
}
