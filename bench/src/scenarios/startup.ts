import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { cpuShare, cpuSnapshot } from '../cpu-usage.ts';
import { median } from '../in-process.ts';
import { reportScenario } from '../report.ts';
import { describeBuild, processTree, roundOrder, type Build } from './builds.ts';

/**
 * `pnpm bench startup [--checkouts <dirA>,<dirB>] [--rounds 3]` (issue 35): how long the bundled
 * examples take from spawn to ready, as a newcomer starts them (`pnpm start`, the sources through tsx)
 * and as the image does (the compiled server), each cold (every compile cache empty, as on a fresh
 * clone or a new ECS task) and warm (a second start). Ready is the log line "model repository loaded"
 * (the moment /v2/health/ready answers 200). Beside the wall time, the CPU the server's processes had
 * used by then (every process it started, esbuild's included), which another tenant of the host does
 * not inflate as it does the wall time. Checkouts are measured interleaved, in an order that changes
 * from round to round; the figures are medians over the rounds.
 */

export type StartupTarget = 'pnpm start' | 'compiled';
export type CacheState = 'cold' | 'warm';
export interface Start {
  readonly target: StartupTarget;
  readonly cache: CacheState;
}
/** Cold before warm: a warm start is a second start. */
export const STARTS: readonly Start[] = [
  { target: 'pnpm start', cache: 'cold' },
  { target: 'pnpm start', cache: 'warm' },
  { target: 'compiled', cache: 'cold' },
  { target: 'compiled', cache: 'warm' },
];

/** On loopback and ephemeral ports, stopping at once: flags every checkout since the first knows. */
const SERVE_FLAGS = [
  '--http-address',
  '127.0.0.1',
  '--http-port',
  '0',
  '--grpc-port',
  '0',
  '--metrics-port',
  '0',
  '--shutdown-grace-secs',
  '0',
];
const COMMANDS: Record<StartupTarget, { command: string; args: readonly string[] }> = {
  // package.json's `start` with the flags appended, as `pnpm start --http-port 0` runs it.
  'pnpm start': { command: 'pnpm', args: ['--silent', 'start', ...SERVE_FLAGS] },
  compiled: {
    command: process.execPath,
    args: [
      '--conditions=batchwise-dist',
      'packages/server/dist/cli/main.js',
      'serve',
      '--model-repository',
      'examples/model_repository',
      ...SERVE_FLAGS,
    ],
  },
};
const READY_TIMEOUT_MS = 180_000;

export interface StartupMeasurement {
  readonly round: number;
  readonly checkout: string;
  readonly target: StartupTarget;
  readonly cache: CacheState;
  /** Spawn to the log line "listening; loading models". */
  readonly listeningMs: number;
  /** Spawn to "model repository loaded". */
  readonly readyMs: number;
  /** CPU time of the server's processes from spawn to ready. */
  readonly cpuMs?: number;
  /** Cores' worth of CPU that the rest of the host used meanwhile. */
  readonly otherCores?: number;
}

/**
 * Empties every compile cache a start of `checkout` reads: tsx's (under the TMPDIR the scenario gives
 * its servers) and those under the server package's node_modules/.cache (the bundles its worker threads
 * start from when it runs from source).
 */
async function emptyCompileCaches(checkout: string, tmp: string): Promise<void> {
  await rm(join(checkout, 'packages', 'server', 'node_modules', '.cache'), { recursive: true, force: true });
  await rm(tmp, { recursive: true, force: true });
}

/** Starts `target` in `checkout`, times it to ready, and stops it (its whole process group). */
async function timeStart(
  checkout: string,
  target: StartupTarget,
  tmp: string,
): Promise<Omit<StartupMeasurement, 'round' | 'checkout' | 'target' | 'cache'>> {
  const { command, args } = COMMANDS[target];
  const hostBefore = cpuSnapshot([]);
  const started = performance.now();
  const child = spawn(command, args, {
    cwd: checkout,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TMPDIR: tmp },
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise((resolve, reject) => {
      let listeningMs = NaN;
      createInterface({ input: child.stdout! }).on('line', (line) => {
        let entry: Record<string, unknown>;
        try {
          entry = JSON.parse(line) as Record<string, unknown>;
        } catch {
          return;
        }
        if (entry['msg'] === 'listening; loading models') listeningMs = performance.now() - started;
        if (entry['msg'] !== 'model repository loaded') return;
        const readyMs = performance.now() - started;
        if (entry['ready'] !== true) return reject(new Error(`${target} in ${checkout} loaded the repository but is not ready`));
        const usage = cpuShare(hostBefore, cpuSnapshot(processTree(child.pid!)));
        resolve({
          listeningMs,
          readyMs,
          ...(usage && { cpuMs: usage.ownCores * readyMs, otherCores: usage.otherCores }),
        });
      });
      timer = setTimeout(
        () => reject(new Error(`${target} in ${checkout} not ready within ${READY_TIMEOUT_MS / 1000} s`)),
        READY_TIMEOUT_MS,
      );
      void exited.then((code) => reject(new Error(`${target} in ${checkout} exited (${code}) before it was ready: ${stderr}`)));
    });
  } finally {
    clearTimeout(timer);
    await stopGroup(child.pid!, exited);
  }
}

/** SIGTERM to the process group (pnpm, tsx and the server behind them), SIGKILL to what is left after 10 s. */
async function stopGroup(pid: number, exited: Promise<unknown>): Promise<void> {
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(-pid, name);
    } catch {
      // The group is gone.
    }
  };
  signal('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([exited, new Promise((resolve) => (timer = setTimeout(resolve, 10_000)))]);
  clearTimeout(timer);
  signal('SIGKILL');
}

export async function runStartup(options: {
  /** Checkouts with node_modules installed and packages/server/dist built. */
  checkouts: readonly string[];
  rounds: number;
  /** What each round starts, in order. @default STARTS */
  starts?: readonly Start[];
  log: (line: string) => void;
  name?: string;
}): Promise<StartupMeasurement[]> {
  const { log } = options;
  if (options.checkouts.length === 0) throw new Error('startup: no checkout given');
  if (!(Number.isInteger(options.rounds) && options.rounds >= 1))
    throw new Error(`startup: --rounds must be a whole number >= 1, not ${options.rounds}`);
  const builds: Build[] = options.checkouts.map(describeBuild);
  const starts = options.starts ?? STARTS;
  const scratch = await mkdtemp(join(tmpdir(), 'batchwise-startup-'));
  const measurements: StartupMeasurement[] = [];
  try {
    for (let round = 0; round < options.rounds; round++) {
      for (const build of roundOrder(builds, round, options.rounds)) {
        const tmp = join(scratch, build.label);
        for (const { target, cache } of starts) {
          if (cache === 'cold') await emptyCompileCaches(build.dir, tmp);
          const m: StartupMeasurement = { round, checkout: build.label, target, cache, ...(await timeStart(build.dir, target, tmp)) };
          measurements.push(m);
          log(
            `round ${round + 1} ${build.label} ${target} ${cache}: listening ${(m.listeningMs / 1000).toFixed(2)} s, ` +
              `ready ${(m.readyMs / 1000).toFixed(2)} s, CPU ${m.cpuMs === undefined ? '?' : (m.cpuMs / 1000).toFixed(2)} s, ` +
              `other ${m.otherCores?.toFixed(2) ?? '?'} cores`,
          );
        }
      }
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  const rows = builds.flatMap((build) =>
    starts.map(({ target, cache }) => {
      const ms = measurements.filter((m) => m.checkout === build.label && m.target === target && m.cache === cache);
      const middle = (of: (m: StartupMeasurement) => number | undefined) =>
        median(ms.map(of).filter((v): v is number => v !== undefined && Number.isFinite(v)));
      const seconds = (of: (m: StartupMeasurement) => number | undefined) => (middle(of) / 1000).toFixed(2);
      return [
        build.label,
        target,
        cache,
        seconds((m) => m.listeningMs),
        seconds((m) => m.readyMs),
        seconds((m) => m.cpuMs),
        middle((m) => m.otherCores).toFixed(2),
      ];
    }),
  );
  await reportScenario(
    {
      name: options.name ?? 'startup',
      title: 'Start-up of the bundled examples: spawn to ready',
      intro:
        `examples/model_repository, ${options.rounds} rounds, medians. \`pnpm start\` runs the sources through tsx; compiled is ` +
        '`node --conditions=batchwise-dist packages/server/dist/cli/main.js`, as the image. Cold: every compile cache emptied ' +
        "first (tsx's, and the server package's node_modules/.cache); warm: the start after it. CPU: the server's processes " +
        'from spawn to ready; other: the cores the rest of the host used meanwhile.',
      tables: [{ headers: ['checkout', 'start', 'cache', 'listening s', 'ready s', 'CPU s', 'other cores'], rows }],
      notes: builds.map((b) => `${b.label}: ${b.dir} (${b.subject})`),
      checks: [],
      json: { checkouts: builds, measurements },
    },
    log,
  );
  return measurements;
}
