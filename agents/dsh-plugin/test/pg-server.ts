// A throwaway PostgreSQL server for the tests, started as test/framework/pgtest starts one:
// initdb with trust auth into a temporary directory, postgres on a free loopback port (as the
// postgres user when running as root), ready once a connection answers. A missing server
// binary is a failure naming `make postgres`, never a skip.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, chownSync, constants, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { kill } from 'node:process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';

export interface PgServer {
  url: string;
  stop(): Promise<void>;
  /** SIGSTOPs the server and its backends (a hung database); resume undoes it. */
  pause(): void;
  resume(): void;
}

function findBinaries(): string {
  const ok = (d: string) => ['initdb', 'postgres'].every((b) => { try { accessSync(join(d, b), constants.X_OK); return true; } catch { return false; } });
  const env = process.env.PGTEST_BIN_DIR;
  if (env) {
    if (ok(env)) return env;
    throw new Error(`PGTEST_BIN_DIR=${env} does not contain initdb and postgres: run \`make postgres\` or point it at their directory`);
  }
  const root = '/usr/lib/postgresql';
  const dirs = existsSync(root) ? readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a)).map((v) => join(root, v, 'bin')) : [];
  for (const d of dirs) if (ok(d)) return d;
  for (const d of (process.env.PATH ?? '').split(':')) if (d && ok(d)) return d;
  throw new Error('PostgreSQL server binaries (initdb, postgres) not found under /usr/lib/postgresql/*/bin or on PATH: '
    + 'run `make postgres` (hack/ensure-postgres.sh installs Debian\'s postgresql package) or set PGTEST_BIN_DIR');
}

// The server refuses to run as root: as root, it runs as the postgres (or nobody) user.
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of ['postgres', 'nobody']) {
    const r = spawnSync('id', ['-u', name], { encoding: 'utf8' });
    const g = spawnSync('id', ['-g', name], { encoding: 'utf8' });
    if (r.status === 0 && g.status === 0) return { uid: Number(r.stdout.trim()), gid: Number(g.stdout.trim()) };
  }
  throw new Error('running as root and neither a postgres nor a nobody user exists to run the server as');
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export async function startPostgres(timeoutMs = 120_000): Promise<PgServer> {
  const bin = findBinaries();
  const user = serverUser();
  const dir = mkdtempSync(join(user ? '/tmp' : (process.env.TMPDIR || '/tmp'), 'pgtest-'));
  if (user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  const init = spawnSync(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync'],
    { encoding: 'utf8', ...(user ?? {}) });
  if (init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed (${init.status ?? init.signal}):\n${init.stdout}${init.stderr}`);
  }
  const port = await freePort();
  const logPath = join(dir, 'postgres.log');
  const proc: ChildProcess = spawn(join(bin, 'postgres'), ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1',
    '-c', 'fsync=off', '-c', 'shared_buffers=32MB', '-c', 'logging_collector=off', '-c', 'log_min_messages=warning'],
  { stdio: ['ignore', 'ignore', 'pipe'], ...(user ?? {}) });
  let log = '';
  proc.stderr!.on('data', (b: Buffer) => { log += b.toString(); });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  let gone = false;
  void exited.then(() => { gone = true; });
  const url = `postgres://postgres@127.0.0.1:${port}/postgres?sslmode=disable`;
  // The server's backends: the processes whose parent is the postmaster (from /proc).
  const children = () => readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((d) => {
    try { return readFileSync(`/proc/${d}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[1] === String(proc.pid); } catch { return false; }
  }).map(Number);
  const signalAll = (sig: NodeJS.Signals) => {
    for (const pid of [proc.pid!, ...children()]) { try { kill(pid, sig); } catch { /* gone */ } }
  };
  const stop = async () => {
    if (!gone) { signalAll('SIGCONT'); proc.kill('SIGINT'); await exited; }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const c = new pg.Client({ connectionString: url });
    try {
      await c.connect();
      await c.query('SELECT 1');
      await c.end();
      return { url, stop, pause: () => signalAll('SIGSTOP'), resume: () => signalAll('SIGCONT') };
    } catch (e) {
      await c.end().catch(() => undefined);
      if (gone || Date.now() > deadline) {
        await stop();
        throw new Error(`postgres on port ${port} did not accept connections (${(e as Error).message}):\n${log}${existsSync(logPath) ? readFileSync(logPath, 'utf8') : ''}`);
      }
      // Wait on the server's own output or a short poll, whichever comes first.
      await Promise.race([exited, new Promise((r) => setTimeout(r, 50))]);
    }
  }
}
