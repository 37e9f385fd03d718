import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

/**
 * The server as a child process: `batchwise tune` runs each candidate config in one, and bench/
 * and the black-box tests in test/ import it through `@batchwise/server/test-support/server-process.ts`.
 */
const SERVER_PACKAGE = new URL('../../', import.meta.url);

/** The two ways to run the CLI: compiled, as the image's ENTRYPOINT runs it, or its sources through tsx. */
export const SERVER_CLIS = {
  compiled: { nodeArgs: ['--conditions=batchwise-dist'], script: new URL('dist/cli/main.js', SERVER_PACKAGE).pathname },
  sources: { nodeArgs: ['--import', 'tsx'], script: new URL('src/cli/main.ts', SERVER_PACKAGE).pathname },
} as const;

/** Picks the CLI child servers run: `compiled` or `sources` (the test suite sets `compiled`). */
export const SERVER_CLI_ENV = 'BATCHWISE_SERVER_CLI';

/** The CLI named by BATCHWISE_SERVER_CLI, else the one this module is part of (compiled in the image). */
function serverCli(): (typeof SERVER_CLIS)[keyof typeof SERVER_CLIS] {
  const chosen = process.env[SERVER_CLI_ENV];
  if (chosen === 'compiled' || chosen === 'sources') return SERVER_CLIS[chosen];
  if (chosen) throw new Error(`${SERVER_CLI_ENV} must be 'compiled' or 'sources', got '${chosen}'`);
  return import.meta.url.endsWith('.js') ? SERVER_CLIS.compiled : SERVER_CLIS.sources;
}
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
  /** The child's working directory. @default - the repository root */
  readonly cwd?: string;
}

/** The serve flags that put a server on ephemeral loopback-reachable ports (read back from its log). */
export const EPHEMERAL_PORT_FLAGS = ['--http-port', '0', '--grpc-port', '0', '--metrics-port', '0'] as const;

/**
 * A child server has no load balancer to deregister it: it stops at once on SIGTERM (no shutdown
 * grace) unless `args` give `--shutdown-grace-secs` again, which wins as the later flag.
 */
const CHILD_SHUTDOWN_FLAGS = ['--shutdown-grace-secs', '0'] as const;

/**
 * The real `batchwise serve` in its own process, on ephemeral loopback ports, so the load
 * generator does not share the server's event loop. Resolves once every model is loaded.
 */
export function startServerProcess(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  options: StartServerOptions = {},
): Promise<ServerProcess> {
  const cli = serverCli();
  return spawnServer(
    [...cli.nodeArgs, cli.script, 'serve', '--http-address', '127.0.0.1', ...EPHEMERAL_PORT_FLAGS, ...CHILD_SHUTDOWN_FLAGS, ...args],
    env,
    options,
  );
}

/**
 * A server from a node command line of its own (`nodeArgv`: what follows `node`, for example an
 * image's ENTRYPOINT and CMD with EPHEMERAL_PORT_FLAGS added). Resolves once every model is loaded.
 */
export async function spawnServer(
  nodeArgv: readonly string[],
  env: NodeJS.ProcessEnv = {},
  options: StartServerOptions = {},
): Promise<ServerProcess> {
  const [command, ...launcherArgs] = [...(options.launcher ?? []), process.execPath];
  const child = spawn(command!, [...launcherArgs, ...serverNodeArgs(), ...nodeArgv], {
    cwd: options.cwd ?? ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
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
