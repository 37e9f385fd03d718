import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

/**
 * The server as a child process: `batchwise tune` runs each candidate config in one, and bench/
 * and the black-box tests in test/ import it through `@batchwise/server/test-support/server-process.ts`.
 */
const CLI = new URL('./main.ts', import.meta.url).pathname;
/** The repository root: the child's working directory. */
const ROOT = new URL('../../../..', import.meta.url).pathname;

export interface ServerProcess {
  readonly httpUrl: string;
  readonly grpcAddress: string;
  readonly metricsUrl: string;
  /** Sends SIGTERM and resolves with the exit code. */
  stop(): Promise<number | null>;
  readonly child: ChildProcess;
  /** Every JSON log line the server printed so far. */
  readonly logs: Record<string, unknown>[];
  readonly exited: Promise<number | null>;
}

/**
 * Extra Node flags for the server process only, from BENCH_SERVER_NODE_ARGS (for example
 * `--cpu-prof --cpu-prof-dir=/tmp/prof`): Node refuses profiling flags in NODE_OPTIONS, and
 * there they would profile the load generator too.
 */
function serverNodeArgs(): string[] {
  return (process.env['BENCH_SERVER_NODE_ARGS'] ?? '').split(/\s+/).filter(Boolean);
}

export interface StartServerOptions {
  /**
   * A command the server's `node` runs under, e.g. `['unshare', '--pid', '--fork', '--mount-proc']`
   * to make the server PID 1 of a new PID namespace. `child` is then the launcher's process.
   * @default - node is spawned directly
   */
  readonly launcher?: readonly string[];
}

/**
 * The real `batchwise serve` in its own process, on ephemeral loopback ports, so the load
 * generator does not share the server's event loop. Resolves once every model is loaded.
 */
export async function startServerProcess(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  options: StartServerOptions = {},
): Promise<ServerProcess> {
  const [command, ...launcherArgs] = [...(options.launcher ?? []), process.execPath];
  const child = spawn(
    command!,
    [
      ...launcherArgs,
      ...serverNodeArgs(),
      '--import',
      'tsx',
      CLI,
      'serve',
      '--http-address',
      '127.0.0.1',
      '--http-port',
      '0',
      '--grpc-port',
      '0',
      '--metrics-port',
      '0',
      ...args,
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
  );
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const logs: Record<string, unknown>[] = [];
  const ports = await new Promise<{ http: number; grpc: number; metrics: number }>((resolve, reject) => {
    let seen: { http: number; grpc: number; metrics: number } | undefined;
    createInterface({ input: child.stdout! }).on('line', (line) => {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      logs.push(entry);
      if (typeof entry['httpPort'] === 'number') {
        seen = { http: entry['httpPort'], grpc: entry['grpcPort'] as number, metrics: entry['metricsPort'] as number };
      }
      if (entry['msg'] === 'model repository loaded' && seen) resolve(seen);
      if (typeof entry['level'] === 'number' && entry['level'] >= 50) process.stderr.write(`server: ${line}\n`);
    });
    void exited.then((code) => reject(new Error(`server exited (${code}) before it was ready: ${stderr.slice(-2000)}`)));
  });
  return {
    child,
    logs,
    exited,
    httpUrl: `http://127.0.0.1:${ports.http}`,
    grpcAddress: `127.0.0.1:${ports.grpc}`,
    metricsUrl: `http://127.0.0.1:${ports.metrics}/metrics`,
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
  };
}
