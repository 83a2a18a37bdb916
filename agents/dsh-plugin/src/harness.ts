// The harness's own packages, resolved from the dsh installation that loaded this plugin (not
// from this package's node_modules): the plugin must use the very classes the running harness
// uses (its persistence base class, message and tool builders). PLANMODE_DSH_ROOT names the
// installation when dsh was not started through its own bin (process.argv[1]).
import { realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

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
