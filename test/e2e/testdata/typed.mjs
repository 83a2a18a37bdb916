// Test plugin: types commands into the harness as a user at its prompt would. On SIGUSR2 it
// runs each line of $PLANMODE_TEST_TYPED (a file) through the harness's command service and
// prints the result as a JSON line ({"op":"typed",...}). A line that is a JSON object
// {"line": "/plan …", "images": [{"data": base64, "mediaType": "image/png"}]} types the line
// with those composer images attached.
import fs from 'node:fs';

export const name = 'planmode-test-typed';
export const inject = ['commands', 'agents'];

export function apply(ctx) {
  const file = process.env.PLANMODE_TEST_TYPED;
  if (!file) return;
  const onSignal = async () => {
    for (const raw of fs.readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
      const { line, images } = raw.startsWith('{') ? JSON.parse(raw) : { line: raw, images: [] };
      let result;
      try {
        const agent = ctx.agents.roots()[0];
        result = await ctx.commands.execute(agent, line, images ?? [], AbortSignal.timeout(30000));
      } catch (e) {
        result = { kind: 'error', text: String(e?.message ?? e) };
      }
      process.stdout.write(JSON.stringify({ op: 'typed', line, result: result?.result ?? result }) + '\n');
    }
  };
  process.on('SIGUSR2', onSignal);
  ctx.on('dispose', () => process.off('SIGUSR2', onSignal));
}
