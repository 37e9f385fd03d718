import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import type { WindowOptions } from '@batchwise/client/load';
import { leanFp32Client } from '../lean-http.ts';
import { measureLean, type LeanReading } from '../lean-measure.ts';
import { environment, reportScenario } from '../report.ts';
import { OVERHEAD_MODELS, OVERHEAD_WIDTH, overheadRepository, startEcho, type Peer } from './overhead.ts';

/**
 * `pnpm bench builds --builds <dirA>,<dirB>,...` (issue 34's bisect): several builds of the server,
 * each a checkout of this repository with its compiled server built (packages/server/dist), served
 * side by side from the overhead repository (`tiny`, the 16-float ONNX identity, and `tiny_js`, the
 * blank JavaScript model) beside the bare fastify echo, and measured interleaved in one run: for
 * each round, each concurrency and each model, the echo and every build one after the other in an
 * order rotated and reversed from round to round (roundOrder), each a short window of the lean client. Per build: the
 * server's CPU per request, p50, requests per second, and their ratios over the echo of the same
 * round, and over the build given before it in the same round (stepRatios); the medians over the
 * rounds are the figures (what else runs on this host moves from minute to minute, and a ratio within
 * a round cancels most of it).
 */

/** One build under test: a checkout with its compiled server. */
export interface Build {
  /** Its folder. */
  readonly dir: string;
  /** Its commit (short), or the folder's name when it is not a git checkout. */
  readonly label: string;
  /** Its commit's subject line (what it added), when known. */
  readonly subject: string;
  /** Files changed in the checkout beside its commit (cd35055 runs with @batchwise/client's exports patched to dist). */
  readonly modified: readonly string[];
}

export type BuildsModel = 'tiny' | 'tiny_js';
export const BUILDS_MODELS: readonly BuildsModel[] = [OVERHEAD_MODELS.onnx as 'tiny', OVERHEAD_MODELS.js as 'tiny_js'];
const ECHO = 'echo';

export interface BuildsMeasurement {
  readonly round: number;
  readonly concurrency: number;
  readonly model: BuildsModel;
  /** `echo` or a build's label. */
  readonly target: string;
  /** Position in its round's sequence for this concurrency and model. */
  readonly position: number;
  readonly throughput: number;
  readonly p50Ms: number;
  readonly errors: number;
  /** Requests per execution over the windows (the build's statistics; none for the echo). */
  readonly avgBatch?: number;
  /** The server's CPU per answer, in microseconds (/proc/<pid>/stat of the serving process, every thread). */
  readonly serverCpuUs?: number;
  readonly clientCores: number;
  readonly otherCores?: number;
  /** The host's CPU steal over the measurement (warm-up included), in cores (/proc/stat). */
  readonly stealCores?: number;
}

/** A build's figures at one concurrency on one model: medians over the rounds. */
export interface BuildsSummary {
  readonly target: string;
  readonly concurrency: number;
  readonly model: BuildsModel;
  readonly serverCpuUs: number;
  readonly cpuOverEcho: number;
  readonly p50Ms: number;
  readonly p50OverEcho: number;
  readonly throughput: number;
  readonly throughputOverEcho: number;
  /** Requests per execution (NaN for the echo). */
  readonly avgBatch: number;
  /** The per-round ratios of CPU over the echo's, in round order (the noise). */
  readonly cpuOverEchoRounds: readonly number[];
}

export interface BuildsResult {
  readonly builds: readonly Build[];
  readonly measurements: readonly BuildsMeasurement[];
  readonly summary: readonly BuildsSummary[];
  readonly steps: readonly BuildsStep[];
}

/** The commit of `dir` and its subject, from git when `dir` is a checkout. */
export function describeBuild(dir: string): Build {
  const git = (...args: string[]): string | undefined => {
    try {
      return execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    } catch {
      return undefined;
    }
  };
  const label = git('rev-parse', '--short=7', 'HEAD')?.trim() ?? basename(dir);
  const subject = git('log', '-1', '--format=%s')?.trim() ?? '';
  const modified = (git('status', '--porcelain', '--untracked-files=no') ?? '')
    .split('\n')
    .filter(Boolean)
    .map((line) => line.slice(3));
  return { dir, label, subject, modified };
}

/** How long a build's server may take to load the repository. */
const START_TIMEOUT_MS = 60_000;

/** The compiled CLI of a build. */
const cliOf = (dir: string): string => join(dir, 'packages', 'server', 'dist', 'cli', 'main.js');

/** A build's server process. */
interface BuildServer {
  readonly httpUrl: string;
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
}

/**
 * Starts a build's compiled server on the overhead repository, as the image runs it (`node
 * --conditions=batchwise-dist packages/server/dist/cli/main.js serve`), from the build's own folder,
 * with only the flags every build since cd35055 knows (`--http-address`, the three ports,
 * `--shutdown-grace-secs`). Resolves once its log says the repository is loaded (the line that gave
 * its ports came before), as @batchwise/server's server-process.ts reads it.
 */
function startBuild(build: Build, repo: string): Promise<BuildServer> {
  const cli = cliOf(build.dir);
  const args = ['--conditions=batchwise-dist', cli, 'serve', '--model-repository', repo, '--http-address', '127.0.0.1'];
  args.push('--http-port', '0', '--grpc-port', '0', '--metrics-port', '0', '--shutdown-grace-secs', '0');
  const child = spawn(process.execPath, args, { cwd: build.dir, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  let timer: NodeJS.Timeout | undefined;
  return new Promise<BuildServer>((resolve, reject) => {
    let httpPort: number | undefined;
    createInterface({ input: child.stdout! }).on('line', (line) => {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      if (typeof entry['httpPort'] === 'number') httpPort = entry['httpPort'];
      if (entry['msg'] === 'model repository loaded' && httpPort !== undefined) {
        resolve({ httpUrl: `http://127.0.0.1:${httpPort}`, child, exited });
      }
      if (typeof entry['level'] === 'number' && entry['level'] >= 50) process.stderr.write(`${build.label}: ${line}\n`);
    });
    timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`not ready within ${START_TIMEOUT_MS / 1000} s: ${stderr.slice(-2000)}`));
    }, START_TIMEOUT_MS);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`exited (${code}) before it was ready: ${stderr.slice(-2000)}`));
    });
  }).finally(() => clearTimeout(timer));
}

/** Threads of a process (/proc/<pid>/task), 0 when it is gone. */
function threadCount(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/task`).length;
  } catch {
    return 0;
  }
}

/** A process and its descendants (/proc/<pid>/task/<tid>/children). */
export function processTree(pid: number): number[] {
  const children: number[] = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      if (text) children.push(...text.split(/\s+/).map(Number));
    }
  } catch {
    // Gone, or no children file: no descendants.
  }
  return [pid, ...children.flatMap(processTree)];
}

/**
 * The process that serves, of the one started and its descendants: the one with the most threads.
 * A CLI that starts through a launcher (a parent that spawns the real server, as the CLI does when it
 * is PID 1) has a main thread and a few of libuv's; the server has ONNX Runtime's and the workers'
 * besides. Reading the launcher's CPU would read next to nothing.
 */
export function servingPid(pid: number): number {
  const tree = processTree(pid).map((p) => ({ pid: p, threads: threadCount(p) }));
  return tree.reduce((best, p) => (p.threads > best.threads ? p : best)).pid;
}

/** Total and steal jiffies of the host (/proc/stat's first line). */
function hostStat(): { total: number; steal: number } | undefined {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    return { total: fields.reduce((a, b) => a + b, 0), steal: fields[7] ?? 0 };
  } catch {
    return undefined;
  }
}

const median = (values: readonly number[]): number => {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/**
 * The order of round `round` (0-based) over `targets`: rotated by round x targets / rounds, so that
 * over the rounds each target is measured early, in the middle and late in its sequence, and reversed
 * every other round, so that each target follows one neighbour in one round and the other in the next
 * (rotation alone keeps the echo always just before the first build).
 */
export function roundOrder<T>(targets: readonly T[], round: number, rounds: number): T[] {
  const shift = Math.floor((round * targets.length) / Math.max(1, rounds)) % Math.max(1, targets.length);
  const rotated = [...targets.slice(shift), ...targets.slice(0, shift)];
  return round % 2 === 1 ? rotated.reverse() : rotated;
}

/** What each build cost over the one before it, at one concurrency on one model. */
export interface BuildsStep {
  readonly target: string;
  readonly previous: string;
  readonly concurrency: number;
  readonly model: BuildsModel;
  /** The median over the rounds of the ratio in each. */
  readonly cpuOverPrevious: number;
  /** Its CPU per request over the previous build's, each round. */
  readonly rounds: readonly number[];
}

/**
 * What each build cost over the one before it (`order`: the builds as given, oldest first): per
 * concurrency and model, the median over the rounds of its CPU per request over the previous build's
 * in the same round. Two builds measured seconds apart share most of a round's disturbance, which a
 * ratio over the echo (measured once per round) cancels less well.
 */
export function stepRatios(measurements: readonly BuildsMeasurement[], order: readonly string[]): BuildsStep[] {
  const at = new Map(measurements.map((m) => [`${m.target}|${m.round}|${m.concurrency}|${m.model}`, m]));
  const cells = [...new Map(measurements.map((m) => [`${m.concurrency}|${m.model}`, m])).values()];
  const rounds = [...new Set(measurements.map((m) => m.round))].sort((a, b) => a - b);
  return order.slice(1).flatMap((target, i) =>
    cells.map(({ concurrency, model }) => {
      const ratios = rounds.map((r) => {
        const mine = at.get(`${target}|${r}|${concurrency}|${model}`)?.serverCpuUs;
        const theirs = at.get(`${order[i]}|${r}|${concurrency}|${model}`)?.serverCpuUs;
        return mine === undefined || theirs === undefined ? NaN : mine / theirs;
      });
      return { target, previous: order[i]!, concurrency, model, cpuOverPrevious: median(ratios), rounds: ratios };
    }),
  );
}

/** Medians over the rounds per target, concurrency and model, with ratios over the echo of the same round. */
export function summarize(measurements: readonly BuildsMeasurement[]): BuildsSummary[] {
  const key = (m: { concurrency: number; model: string }) => `${m.concurrency}/${m.model}`;
  const echoOf = new Map<string, BuildsMeasurement>();
  for (const m of measurements) if (m.target === ECHO) echoOf.set(`${m.round}/${key(m)}`, m);
  const groups = new Map<string, BuildsMeasurement[]>();
  for (const m of measurements) {
    const k = `${m.target}|${m.concurrency}|${m.model}`;
    groups.set(k, [...(groups.get(k) ?? []), m]);
  }
  return [...groups.values()].map((ms) => {
    const first = ms[0]!;
    const over = (of: (m: BuildsMeasurement) => number | undefined) =>
      ms.map((m) => {
        const echo = echoOf.get(`${m.round}/${key(m)}`);
        const mine = of(m);
        const theirs = echo && of(echo);
        return mine === undefined || theirs === undefined ? NaN : mine / theirs;
      });
    const cpuOverEchoRounds = over((m) => m.serverCpuUs);
    return {
      target: first.target,
      concurrency: first.concurrency,
      model: first.model,
      serverCpuUs: median(ms.map((m) => m.serverCpuUs ?? NaN)),
      cpuOverEcho: median(cpuOverEchoRounds),
      p50Ms: median(ms.map((m) => m.p50Ms)),
      p50OverEcho: median(over((m) => m.p50Ms)),
      throughput: median(ms.map((m) => m.throughput)),
      throughputOverEcho: median(over((m) => m.throughput)),
      avgBatch: median(ms.map((m) => m.avgBatch ?? NaN)),
      cpuOverEchoRounds,
    };
  });
}

export async function runBuilds(options: {
  /** The checkouts, each with packages/server/dist built. */
  builds: readonly string[];
  rounds: number;
  /** In the order measured within a round. */
  concurrencies: readonly number[];
  windows: WindowOptions;
  log: (line: string) => void;
  name?: string;
}): Promise<BuildsResult> {
  const { log } = options;
  if (options.builds.length === 0) throw new Error('builds: --builds <dirA>,<dirB>,... names no build');
  if (!(Number.isInteger(options.rounds) && options.rounds >= 1))
    throw new Error(`builds: --rounds must be a whole number >= 1, not ${options.rounds}`);
  if (options.concurrencies.length === 0 || options.concurrencies.some((c) => !(Number.isInteger(c) && c >= 1))) {
    throw new Error(`builds: --concurrency must list whole numbers >= 1, not ${options.concurrencies.join(',')}`);
  }
  const env = environment();
  const builds = options.builds.map(describeBuild);
  const labels = new Set<string>();
  for (const b of builds) {
    if (labels.has(b.label)) throw new Error(`builds: ${b.label} given twice`);
    labels.add(b.label);
    if (!existsSync(cliOf(b.dir))) throw new Error(`builds: ${b.dir} has no compiled server (packages/server/dist/cli/main.js)`);
  }
  const { repo } = await overheadRepository('builds', log);
  const echoStart = startEcho();
  const serverStarts = builds.map((b) => startBuild(b, repo));
  // Failures are read where each start is awaited (one may fail while another is awaited first).
  for (const start of [echoStart, ...serverStarts]) start.catch(() => undefined);
  const measurements: BuildsMeasurement[] = [];
  try {
    const echo: Peer = await echoStart;
    // Each build's server (rejections name the build: an old commit may fail to start).
    const servers = new Map<string, { server: BuildServer; pid: number }>();
    for (const [i, start] of serverStarts.entries()) {
      const build = builds[i]!;
      const server = await start.catch((error: Error) => {
        throw new Error(`build ${build.label} (${build.dir}) did not start: ${error.message}`);
      });
      const pid = servingPid(server.child.pid!);
      log(
        `${build.label}: pid ${pid}${pid === server.child.pid ? '' : ` (the server, child of launcher ${server.child.pid})`}, ` +
          `${threadCount(pid)} threads, ${server.httpUrl}${build.modified.length ? `, modified: ${build.modified.join(' ')}` : ''}`,
      );
      servers.set(build.label, { server, pid });
    }
    const targets = [ECHO, ...builds.map((b) => b.label)];
    const measureOne = async (target: string, model: BuildsModel, concurrency: number, windows: WindowOptions, label: string) => {
      const serving = servers.get(target);
      // The echo answers any model name with the bytes it got; it is asked as `tiny`.
      const url = serving ? serving.server.httpUrl : echo.url;
      const client = leanFp32Client(url, serving ? model : OVERHEAD_MODELS.onnx, OVERHEAD_WIDTH);
      const statBefore = hostStat();
      try {
        const reading: LeanReading = await measureLean(
          label,
          client,
          { concurrency },
          { ...windows, log },
          serving ? { pid: serving.pid, stats: { httpUrl: url, model } } : { pid: echo.pid },
        );
        const statAfter = hostStat();
        const stealCores =
          statBefore && statAfter && statAfter.total > statBefore.total
            ? ((statAfter.steal - statBefore.steal) / (statAfter.total - statBefore.total)) * (env['cpus'] as number)
            : undefined;
        return { reading, stealCores };
      } finally {
        client.close();
      }
    };
    // A process just started is slower at first (V8 compiling its hot paths, ONNX Runtime's first runs):
    // one unrecorded window of every target on each model at the top concurrency before the rounds.
    const top = Math.max(...options.concurrencies);
    const priming = { ...options.windows, warmupMs: 0, minWindows: 1, maxWindows: 1 };
    for (const model of BUILDS_MODELS) {
      for (const target of targets) await measureOne(target, model, top, priming, `priming ${target} ${model} c=${top}`);
    }
    for (let round = 0; round < options.rounds; round++) {
      for (const concurrency of options.concurrencies) {
        for (const model of BUILDS_MODELS) {
          const order = roundOrder(targets, round, options.rounds);
          for (const [position, target] of order.entries()) {
            const label = `round ${round + 1} ${model} c=${concurrency} ${target}`;
            const { reading, stealCores } = await measureOne(target, model, concurrency, options.windows, label);
            const m: BuildsMeasurement = {
              round,
              concurrency,
              model,
              target,
              position,
              throughput: reading.client.throughput,
              p50Ms: reading.client.latencyMs.p50,
              errors: reading.client.errors,
              ...(reading.server && { avgBatch: reading.server.avgBatchSize }),
              ...(reading.serverCpuMsPerAnswer !== undefined && { serverCpuUs: reading.serverCpuMsPerAnswer * 1000 }),
              clientCores: reading.clientCores,
              ...(reading.otherCores !== undefined && { otherCores: reading.otherCores }),
              ...(stealCores !== undefined && { stealCores }),
            };
            measurements.push(m);
            log(
              `${label}: ${Math.round(m.throughput)} req/s, p50 ${m.p50Ms.toFixed(3)} ms, ` +
                `${m.avgBatch === undefined ? '' : `batch ${m.avgBatch.toFixed(2)}, `}` +
                `server ${m.serverCpuUs === undefined ? '?' : Math.round(m.serverCpuUs)} us/req, other ${m.otherCores?.toFixed(2) ?? '?'}, ` +
                `steal ${m.stealCores?.toFixed(2) ?? '?'}${m.errors ? `, ${m.errors} errors` : ''}`,
            );
          }
        }
      }
    }
  } finally {
    await Promise.allSettled([echoStart.then((p) => p.stop()), ...serverStarts.map((s) => s.then(stopServer))]);
  }

  const summary = summarize(measurements);
  const find = (target: string, concurrency: number, model: BuildsModel) =>
    summary.find((s) => s.target === target && s.concurrency === concurrency && s.model === model);
  const cs = [...options.concurrencies].sort((a, b) => b - a);
  const cell = (target: string, c: number, model: BuildsModel, of: (s: BuildsSummary) => string) => {
    const s = find(target, c, model);
    return s ? of(s) : '';
  };
  const cpuCell = (s: BuildsSummary) =>
    s.target === ECHO ? `${Math.round(s.serverCpuUs)}` : `${Math.round(s.serverCpuUs)} (${s.cpuOverEcho.toFixed(2)}x)`;
  const p50Cell = (s: BuildsSummary) => (s.target === ECHO ? s.p50Ms.toFixed(3) : `${s.p50Ms.toFixed(3)} (${s.p50OverEcho.toFixed(2)}x)`);
  const bottom = cs[cs.length - 1]!;
  const headers = [
    'build',
    'what it is',
    ...cs.flatMap((c) => BUILDS_MODELS.map((m) => `${m} c=${c} cpu us/req (x echo)`)),
    ...BUILDS_MODELS.map((m) => `${m} c=${bottom} p50 ms (x echo)`),
    ...BUILDS_MODELS.map((m) => `${m} c=${cs[0]} req/s`),
  ];
  const subjectOf = (target: string) => {
    const b = builds.find((x) => x.label === target);
    if (!b) return 'bare fastify echo';
    const subject = b.subject.length > 90 ? `${b.subject.slice(0, 87)}...` : b.subject;
    return `${subject}${b.modified.length ? ` [+ ${b.modified.join(', ')}]` : ''}`;
  };
  const rows = [ECHO, ...builds.map((b) => b.label)].map((target) => [
    target,
    subjectOf(target).replaceAll('|', '/'),
    ...cs.flatMap((c) => BUILDS_MODELS.map((m) => cell(target, c, m, cpuCell))),
    ...BUILDS_MODELS.map((m) => cell(target, bottom, m, p50Cell)),
    ...BUILDS_MODELS.map((m) => cell(target, cs[0]!, m, (s) => String(Math.round(s.throughput)))),
  ]);
  const noiseHeaders = [
    'build',
    ...cs.flatMap((c) => BUILDS_MODELS.map((m) => `${m} c=${c}: cpu x echo per round`)),
    ...BUILDS_MODELS.map((m) => `${m} c=${cs[0]} batch`),
  ];
  const noiseRows = builds.map((b) => [
    b.label,
    ...cs.flatMap((c) => BUILDS_MODELS.map((m) => cell(b.label, c, m, (s) => s.cpuOverEchoRounds.map((r) => r.toFixed(2)).join(' / ')))),
    ...BUILDS_MODELS.map((m) => cell(b.label, cs[0]!, m, (s) => s.avgBatch.toFixed(2))),
  ]);
  const steps = stepRatios(
    measurements,
    builds.map((b) => b.label),
  );
  const stepHeaders = ['build', 'over', ...cs.flatMap((c) => BUILDS_MODELS.map((m) => `${m} c=${c} cpu (each round)`))];
  const stepRows = builds.slice(1).map((b, i) => [
    b.label,
    builds[i]!.label,
    ...cs.flatMap((c) =>
      BUILDS_MODELS.map((m) => {
        const step = steps.find((x) => x.target === b.label && x.concurrency === c && x.model === m);
        return step ? `${step.cpuOverPrevious.toFixed(2)}x (${step.rounds.map((r) => r.toFixed(2)).join(' ')})` : '';
      }),
    ),
  ]);
  const steal = median(measurements.map((m) => m.stealCores ?? NaN));
  const other = median(measurements.map((m) => m.otherCores ?? NaN));
  const errors = measurements.reduce((a, m) => a + m.errors, 0);
  await reportScenario(
    {
      name: options.name ?? 'builds',
      title: 'pnpm bench builds: compiled servers of several commits, interleaved against the bare fastify echo',
      intro:
        `The overhead repository (tiny: 16-float ONNX identity; tiny_js: blank JavaScript model) served by each build's compiled ` +
        `server side by side, HTTP binary, the lean client, closed loop. ${options.rounds} rounds; in each, per concurrency ` +
        `(${options.concurrencies.join(', ')}) and model, the echo and every build one after another in an order rotated and reversed from round to round; ` +
        `warm-up ${options.windows.warmupMs} ms and ${options.windows.minWindows} window(s) of ${options.windows.windowMs} ms each. ` +
        `Figures are medians over the rounds; ratios are over the echo of the same round (median of the per-round ratios). ` +
        `Median other cpu ${other.toFixed(2)} cores, median steal ${steal.toFixed(2)} cores, ${errors} errors (${env['date']}).`,
      tables: [
        { headers, rows },
        {
          caption: 'CPU per request over the echo, each round (the noise), and the median requests per execution',
          headers: noiseHeaders,
          rows: noiseRows,
        },
        {
          caption: "Each build's CPU per request over the build before it: the median of the per-round ratios (each round's in brackets)",
          headers: stepHeaders,
          rows: stepRows,
        },
      ],
      checks: [],
      json: {
        environment: env,
        rounds: options.rounds,
        concurrencies: options.concurrencies,
        windows: options.windows,
        builds,
        summary,
        steps,
        measurements,
      },
    },
    log,
  );
  return { builds, measurements, summary, steps };
}

/** SIGTERM, then SIGKILL if it has not exited within 10 s. */
async function stopServer(server: BuildServer): Promise<void> {
  server.child.kill('SIGTERM');
  const timer = setTimeout(() => server.child.kill('SIGKILL'), 10_000);
  try {
    await server.exited;
  } finally {
    clearTimeout(timer);
  }
}
