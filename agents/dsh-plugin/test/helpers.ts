import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (tests run from dist/test). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
