/**
 * Stop, start again at once (issue 35). A server keeps its ports through --shutdown-grace-secs
 * after a SIGTERM, for load balancers: a second start meanwhile fails, and says in one line who
 * holds the port and how to avoid it. A developer who stops it in a terminal (stdin is one) does
 * not wait through that grace. Real child servers of the compiled CLI; the terminal is a
 * pseudo-terminal made by util-linux `script`, and Ctrl-C is typed into it.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServerProcess, SERVER_CLIS, type ServerProcess } from '../packages/server/src/cli/server-process.ts';
import { runCli, type CliRun } from './support/cli.ts';
import { makeRepository } from './support/repository.ts';
import { waitFor } from './support/wait-for.ts';

let repo: { dir: string; remove(): Promise<void> };
beforeAll(async () => {
  repo = await makeRepository([]);
});
afterAll(() => repo?.remove());

const portOf = (url: string) => Number(new URL(url).port);

/** `batchwise serve` on 127.0.0.1 with this HTTP port and free others; it is expected to fail. */
const serveOn = (httpPort: number) =>
  runCli([
    'serve',
    '--model-repository',
    repo.dir,
    '--http-address',
    '127.0.0.1',
    '--http-port',
    String(httpPort),
    '--grpc-port',
    '0',
    '--metrics-port',
    '0',
  ]);

/** Exit 1 and one line on stderr, the CLI's fatal JSON line. */
function failure(run: CliRun): string {
  expect(run.code, run.stderr).toBe(1);
  const lines = run.stderr.split('\n').filter((line) => line !== '');
  expect(lines, run.stderr).toHaveLength(1);
  const line = JSON.parse(lines[0]!) as { level: string; msg: string };
  expect(line.level).toBe('fatal');
  return line.msg;
}

describe('a second start on a port still held', () => {
  let first: ServerProcess;
  beforeAll(async () => {
    first = await startServerProcess(['--model-repository', repo.dir, '--shutdown-grace-secs', '60']);
  });
  afterAll(async () => {
    first?.child.kill('SIGKILL');
    await first?.exited;
  });

  it('beside a server that serves: says another server holds it, ready, and to pick another port', async () => {
    const port = portOf(first.httpUrl);
    expect(failure(await serveOn(port))).toMatch(
      new RegExp(
        `^port ${port} \\(--http-port\\) on 127\\.0\\.0\\.1 is already in use \\(EADDRINUSE\\) by another server that answers ready \\(batchwise [^)]+\\): ` +
          'stop it, or start this one with another --http-port$',
      ),
    );
  });

  it('while the previous server drains through its shutdown grace: says so, and how to avoid it', async () => {
    const port = portOf(first.httpUrl);
    first.child.kill('SIGTERM');
    await waitFor(async () => first.logs.some((l) => l['msg'] === 'not ready; still admitting requests while load balancers notice'));
    expect(failure(await serveOn(port))).toMatch(
      new RegExp(
        `^port ${port} \\(--http-port\\) on 127\\.0\\.0\\.1 is already in use \\(EADDRINUSE\\) by a server that is not ready \\(batchwise [^)]+\\): ` +
          'most likely the previous one, still shutting down, which keeps its ports through --shutdown-grace-secs .*; ' +
          'wait until it exits, or stop it now with a second Ctrl-C or SIGTERM; .*--shutdown-grace-secs 0$',
      ),
    );
    // The second signal ends the grace: the port is free, and a start takes it.
    first.child.kill('SIGTERM');
    await first.exited;
    const again = await startServerProcess(['--model-repository', repo.dir, '--http-port', String(port)]);
    expect(portOf(again.httpUrl)).toBe(port);
    await again.stop();
  });

  it('held by something else: says another process holds it', async () => {
    const other = createServer();
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    try {
      const port = (other.address() as { port: number }).port;
      expect(failure(await serveOn(port))).toMatch(
        new RegExp(
          `^port ${port} \\(--http-port\\) on 127\\.0\\.0\\.1 is already in use \\(EADDRINUSE\\) by another process: .*--shutdown-grace-secs.*another --http-port$`,
        ),
      );
    } finally {
      other.close();
    }
  });
});

/** `batchwise serve` in a pseudo-terminal; `type` writes to it as a keyboard would. */
function serveInTerminal(args: readonly string[]) {
  const cli = SERVER_CLIS.compiled;
  // exec: `script` runs $SHELL -c, and a shell that waits (dash does) dies of the same Ctrl-C.
  const command = `exec ${[process.execPath, ...cli.nodeArgs, cli.script, 'serve', ...args].map((w) => `'${w}'`).join(' ')}`;
  const child = spawn('script', ['-qec', command, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => void (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => void (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const logs = () =>
    output
      .split(/\r?\n/)
      .map((line) => line.slice(line.indexOf('{')))
      .flatMap((line) => {
        try {
          return [JSON.parse(line) as Record<string, unknown>];
        } catch {
          return [];
        }
      });
  return { type: (text: string) => child.stdin.write(text), logs, exited, kill: () => child.kill('SIGKILL') };
}

describe('an interactive stop', () => {
  it('Ctrl-C in a terminal stops without the shutdown grace (the default one is for load balancers)', async () => {
    const server = serveInTerminal([
      '--model-repository',
      repo.dir,
      '--http-address',
      '127.0.0.1',
      '--http-port',
      '0',
      '--grpc-port',
      '0',
      '--metrics-port',
      '0',
    ]);
    try {
      await waitFor(async () => server.logs().some((l) => l['msg'] === 'model repository loaded'), 30_000, 'the server ready');
      server.type('\u0003');
      expect(await server.exited).toBe(0);
      const msgs = server.logs().map((l) => l['msg']);
      expect(server.logs().find((l) => String(l['msg']).startsWith('shutting down'))).toMatchObject({
        signal: 'SIGINT',
        graceMs: 0,
        interactive: true,
        msg: 'shutting down: stdin is a terminal, so without the shutdown grace (it is for load balancers); draining in-flight requests',
      });
      expect(msgs).not.toContain('not ready; still admitting requests while load balancers notice');
      expect(msgs.at(-1)).toBe('drained; exiting');
    } finally {
      server.kill();
    }
  });

  it('a --shutdown-grace-secs given on the command line is kept, in a terminal too', async () => {
    const server = serveInTerminal([
      '--model-repository',
      repo.dir,
      '--http-address',
      '127.0.0.1',
      '--http-port',
      '0',
      '--grpc-port',
      '0',
      '--metrics-port',
      '0',
      '--shutdown-grace-secs',
      '1',
    ]);
    try {
      await waitFor(async () => server.logs().some((l) => l['msg'] === 'model repository loaded'), 30_000, 'the server ready');
      server.type('\u0003');
      expect(await server.exited).toBe(0);
      expect(server.logs().find((l) => String(l['msg']).startsWith('shutting down'))).toMatchObject({ signal: 'SIGINT', graceMs: 1000 });
      expect(server.logs().map((l) => l['msg'])).toContain('not ready; still admitting requests while load balancers notice');
    } finally {
      server.kill();
    }
  });
});
