import { mlp } from '@batchwise/modelgen';
import { cpuShare, cpuSnapshot, type CpuShare } from '../cpu-usage.ts';
import { h2loadHttp, h2loadInstalled, httpRequestFile, type H2loadResult } from '../h2load.ts';
import {
  latencyVsInProcess,
  medianRunMs,
  openInProcess,
  samplesPerSecondOnBatches,
  throughputVsLimit,
  type ReferenceWindow,
} from '../in-process.ts';
import { latencyThroughputSvg, measure, sleep, type Load, type LoadResult, type WindowOptions } from '@batchwise/client/load';
import { environment, ratioCheck, table, writeResult } from '../report.ts';
import { startNaive } from './overhead.ts';
import { breakdown, readStats, type ServerBreakdown } from '../server-stats.ts';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { benchRepository, cachedModel, fp32Config, inferRequest, type Protocol } from '../workload.ts';

export interface BatchingModel {
  readonly layers: number;
  readonly width: number;
}

export const FULL_MODEL: BatchingModel = { layers: 4, width: 2048 };
export const SMOKE_MODEL: BatchingModel = { layers: 2, width: 256 };
export const THREADS = 2;
/** max_queue_delay_microseconds of the batching-on configuration (BENCH_DELAY_US overrides). */
export const DELAY_US = Number(process.env['BENCH_DELAY_US'] ?? 1000);

/** max_batch_size of both configurations. */
const MAX_BATCH_SIZE = 64;

/**
 * Pause before an in-process reference window: after a load the server still works for a
 * moment (0.3-0.4 cores over the first 100 ms, then nothing, measured on the 4x2048 model).
 */
const SETTLE_MS = 250;

/** Open loop: requests outstanding at most (and HTTP connections kept). */
const OPEN_LOOP_MAX_OUTSTANDING = 256;

export interface Point {
  readonly model: string;
  readonly protocol: Protocol;
  /** Closed-loop concurrency; for an open-loop point, the bound on outstanding requests. */
  readonly concurrency: number;
  /** Open loop only: offered requests per second. */
  readonly rate?: number;
  readonly client: LoadResult;
  readonly server: ServerBreakdown;
  /** CPU used by the benchmark (generator and server) and by anything else, during the windows. */
  readonly cpu?: CpuShare;
}

/**
 * A batching-on point compared with the same model run in-process in the bench process, in
 * reference windows just before and just after the server's measurement (the server loaded
 * but idle meanwhile): this machine's speed drifts by up to 1.5x within minutes, so a
 * reference measured at another time mostly measures the drift.
 */
export interface PairedPoint {
  readonly protocol: Protocol;
  /** 1: `c1_p50_over_in_process`; the highest of the closed-loop sweep: `server_vs_limit`. */
  readonly concurrency: number;
  /** The reference windows, before and after the server's measurement. */
  readonly windows: readonly ReferenceWindow[];
  /**
   * latencyVsInProcess or throughputVsLimit (bench/src/in-process.ts) of the server's point and
   * the median over the windows of each batch size's run time.
   */
  readonly comparison: Record<string, number>;
  /**
   * The reference of each window alone (batch-1 ms; samples/s on the server's batches), in
   * order: how far the machine drifted across the server's measurement.
   */
  readonly perWindow: readonly number[];
}

export interface BatchingResult {
  readonly model: string;
  readonly points: Point[];
  readonly paired: PairedPoint[];
  readonly ratios: Record<string, number>;
  /** The naive peer at 16 clients, when measured. */
  readonly naive?: LoadResult;
  /**
   * Batching on and the naive peer at 16 clients driven by h2load, where it is installed: `rounds` alternate
   * between the two; `on` and `naive` are the round whose ratio is the median.
   */
  readonly h2load?: H2loadComparison;
}

/** The h2load rounds, each batching on then the naive peer, and the round of the median ratio. */
export interface H2loadComparison {
  readonly on: H2loadResult;
  readonly naive: H2loadResult;
  readonly rounds: readonly { readonly on: H2loadResult; readonly naive: H2loadResult }[];
}

/** Issue 44: batching on at 16 clients serves at least this many times the naive peer's requests per second. */
export const ON_OVER_NAIVE_C16 = 4;

/** How long h2load measures at 16 clients, after its warm-up, in each of `rounds` rounds. */
export interface H2loadTiming {
  readonly seconds: number;
  readonly warmUpSeconds: number;
  readonly rounds: number;
}
/**
 * Rounds alternate between batching on and the naive peer, and the ratio is the median of the rounds':
 * the machine's speed moves by half within minutes (CPU steal up to 0.9 of its two cores under load), and
 * one reading of each, minutes apart, read anywhere from 3.3 to 4.1 (issue 44).
 */
const H2LOAD_TIMING: H2loadTiming = { seconds: 4, warmUpSeconds: 1, rounds: 5 };

/**
 * `model` at `url` driven by h2load, 16 HTTP/1.1 connections of one binary request at a time: a C client, whose
 * own CPU (a twentieth of a core here, against about 0.3 for the Node generator) leaves the cores to the server.
 */
async function h2loadAt16(
  url: string,
  model: string,
  width: number,
  timing: H2loadTiming,
  log: (line: string) => void,
): Promise<H2loadResult> {
  const result = await h2loadHttp({
    url: `${url}/v2/models/${model}/infer`,
    request: await httpRequestFile(model, width),
    connections: 16,
    ...timing,
  });
  log(
    `  ${model} http-binary c=16, h2load: ${result.perSecond.toFixed(0)} infer/s, p99 ${result.p99Ms.toFixed(1)} ms, ${result.errors} errors`,
  );
  return result;
}

/**
 * The naive peer (bench/src/naive-server.ts) on `file`, closed loop at `concurrency` over HTTP binary; then,
 * with `h2load`, rounds of h2load at 16 clients alternating between the server's `mlp_on` at `onUrl` and the peer.
 */
async function measureNaive(
  file: string,
  width: number,
  concurrency: number,
  windows: WindowOptions,
  log: (line: string) => void,
  h2load: { timing: H2loadTiming; onUrl: string } | undefined,
): Promise<{ node: LoadResult; h2load?: H2loadComparison }> {
  const naive = await startNaive(file);
  try {
    const { send, close } = inferRequest({ httpUrl: naive.url, grpcAddress: '' }, 'http-binary', 'mlp_naive', width, concurrency);
    let node: LoadResult;
    try {
      await send();
      node = await measure(`naive http-binary c=${concurrency}`, send, { concurrency }, { ...windows, log });
    } finally {
      await close();
    }
    if (!h2load) return { node };
    // The Node generator's connections are closed first: h2load has each server to itself.
    const rounds: { on: H2loadResult; naive: H2loadResult }[] = [];
    for (let i = 0; i < h2load.timing.rounds; i++) {
      const on = await h2loadAt16(h2load.onUrl, 'mlp_on', width, h2load.timing, log);
      rounds.push({ on, naive: await h2loadAt16(naive.url, 'mlp_naive', width, h2load.timing, log) });
    }
    const byRatio = [...rounds].sort((a, b) => roundRatio(a) - roundRatio(b));
    return { node, h2load: { ...byRatio[(byRatio.length - 1) >> 1]!, rounds } };
  } finally {
    naive.stop();
  }
}

const roundRatio = (round: { readonly on: H2loadResult; readonly naive: H2loadResult }): number =>
  round.on.perSecond / round.naive.perSecond;

/** The config of batching off or on (`max_queue_delay_microseconds` DELAY_US), THREADS intra-op threads. */
export function batchingConfig(name: string, model: BatchingModel, batching: boolean): string {
  return fp32Config(name, {
    width: model.width,
    maxBatchSize: MAX_BATCH_SIZE,
    batching,
    delayUs: DELAY_US,
    threads: THREADS,
    // The instance in its worker, as the full model always is: the smoke model is small enough for the event loop.
    parameters: { batchwise_event_loop_run_us: '0' },
  });
}

/** The MLP served with batching off and on, over a sweep of concurrencies. */
export async function runBatching(options: {
  model: BatchingModel;
  /** Closed-loop sweep. */
  concurrencies: readonly number[];
  /** Open-loop sweep (requests/s), after the closed-loop one. */
  rates?: readonly number[];
  arrivals?: 'poisson' | 'constant';
  windows: WindowOptions;
  protocols?: readonly Protocol[];
  log: (line: string) => void;
  name?: string;
  /** Length of each in-process reference window. @default windows.windowMs */
  referenceWindowMs?: number;
  /** The 16-client comparison with the naive peer by h2load (where installed). @default H2LOAD_TIMING */
  h2load?: H2loadTiming;
}): Promise<BatchingResult> {
  const { model, log } = options;
  const label = `mlp-${model.layers}x${model.width}`;
  const file = await cachedModel(label, () => mlp({ layers: model.layers, width: model.width }), log);
  const repo = await benchRepository('batching', [
    { name: 'mlp_off', modelFile: file, config: batchingConfig('mlp_off', model, false) },
    { name: 'mlp_on', modelFile: file, config: batchingConfig('mlp_on', model, true) },
  ]);
  const env = environment();
  // Paired with the in-process reference: batching on, closed loop, at c=1 and at the top.
  const top = options.concurrencies.length > 0 ? Math.max(...options.concurrencies) : undefined;
  const referenceMs = options.referenceWindowMs ?? options.windows.windowMs;
  // One session for the whole run, idle while the server is measured (its two threads stop
  // spinning within 100 ms of a window, inside the measurement's warm-up).
  const reference =
    top === undefined ? undefined : await openInProcess({ file, width: model.width, config: batchingConfig('mlp_on', model, true) });
  const server = await startServerProcess(['--model-repository', repo]).catch(async (error: unknown) => {
    await reference?.release();
    throw error;
  });
  const referenceWindow = async (what: string, batchSizes: readonly number[]): Promise<ReferenceWindow> => {
    await sleep(SETTLE_MS);
    const w = await reference!.window(batchSizes, referenceMs, [process.pid, server.child.pid!]);
    const first = w.runs[0]!;
    const last = w.runs.at(-1)!;
    const runs = w.runs.length === 1 ? '' : ` ... batch ${last.batchSize} ${last.runMs.toFixed(2)} ms (${w.runs.length} sizes)`;
    log(
      `  in-process reference ${what}: batch ${first.batchSize} ${first.runMs.toFixed(2)} ms${runs} per run${w.cpu ? `; server ${w.cpu.pidCores[1]} cores, other ${w.cpu.otherCores}` : ''}`,
    );
    return w;
  };
  const points: Point[] = [];
  const paired: PairedPoint[] = [];
  let naive: LoadResult | undefined;
  let h2load: BatchingResult['h2load'];
  const loads: { load: Load; concurrency: number; rate?: number; tag: string }[] = [
    ...options.concurrencies.map((concurrency) => ({ load: { concurrency }, concurrency, tag: `c=${concurrency}` })),
    ...(options.rates ?? []).map((rate) => ({
      load: { rate, arrivals: options.arrivals ?? 'poisson', maxOutstanding: OPEN_LOOP_MAX_OUTSTANDING },
      concurrency: OPEN_LOOP_MAX_OUTSTANDING,
      rate,
      tag: `rate=${rate}/s`,
    })),
  ];
  try {
    for (const protocol of options.protocols ?? ['http-binary']) {
      for (const name of ['mlp_off', 'mlp_on']) {
        for (const { load, concurrency, rate, tag } of loads) {
          const pair = reference && name === 'mlp_on' && rate === undefined && (concurrency === 1 || concurrency === top);
          // Before, every size the server can form at this concurrency (which ones it will form is
          // known only after); after, the sizes it formed.
          const before = pair
            ? await referenceWindow(`before ${name} ${protocol} ${tag}`, range(1, Math.min(concurrency, MAX_BATCH_SIZE)))
            : undefined;
          const { send, close } = inferRequest(server, protocol, name, model.width, concurrency);
          // One request first: a new client's connection is not a window's to pay (as in overhead.ts).
          await send();
          const pids = [process.pid, server.child.pid!];
          let statsBefore: Awaited<ReturnType<typeof readStats>> | undefined;
          let statsAfter: typeof statsBefore;
          let cpuBefore: ReturnType<typeof cpuSnapshot>;
          let cpuAfter: typeof cpuBefore;
          const result = await measure(
            `${name} ${protocol} ${tag}`,
            send,
            load,
            { ...options.windows, log },
            {
              onMeasureStart: async () => {
                statsBefore = await readStats(server.httpUrl, name);
                cpuBefore = cpuSnapshot(pids);
              },
              onMeasureEnd: async () => {
                cpuAfter = cpuSnapshot(pids);
                statsAfter = await readStats(server.httpUrl, name);
              },
            },
          );
          await close();
          const cpu = cpuShare(cpuBefore, cpuAfter);
          const point: Point = {
            model: name,
            protocol,
            concurrency,
            ...(rate !== undefined && { rate }),
            client: result,
            server: breakdown(statsBefore!, statsAfter!),
            ...(cpu && { cpu }),
          };
          points.push(point);
          if (before) {
            const formed = Object.keys(point.server.batches).map(Number);
            const afterWindow = await referenceWindow(
              `after ${name} ${protocol} ${tag}`,
              concurrency === 1 || formed.length === 0 ? [1] : formed,
            );
            const p = pairedPoint(point, [before, afterWindow]);
            if (p) paired.push(p);
          }
        }
      }
    }
    // What a Node shop writes instead (issue 44): fastify + onnxruntime-node on the same file, session.run in the route.
    if (top !== undefined && top >= 16 && (options.protocols ?? ['http-binary']).includes('http-binary')) {
      const timing = (await h2loadInstalled()) ? (options.h2load ?? H2LOAD_TIMING) : undefined;
      const measured = await measureNaive(file, model.width, 16, options.windows, log, timing && { timing, onUrl: server.httpUrl });
      naive = measured.node;
      h2load = measured.h2load;
    }
  } finally {
    await reference?.release();
    await server.stop();
  }
  const ratios: Record<string, number> = { ...batchingRatios(points), ...pairedRatios(paired) };
  const onC16 = points.find((p) => p.model === 'mlp_on' && p.protocol === 'http-binary' && p.concurrency === 16 && p.rate === undefined);
  if (naive && onC16) {
    ratios['throughput_on_vs_naive_c16'] = onC16.client.throughput / naive.throughput;
    const check = ratioCheck('throughput_on_vs_naive_c16', ratios['throughput_on_vs_naive_c16'], { atLeast: ON_OVER_NAIVE_C16 });
    log(`naive fastify + onnxruntime-node at c=16: ${naive.throughput.toFixed(0)} infer/s, p99 ${naive.latencyMs.p99.toFixed(1)} ms`);
    log(`${check.pass ? 'PASS' : 'MISS'} ${check.target}: ${check.detail}`);
  }
  if (h2load) {
    // The same comparison with a C client (issue 44 measures from outside with wrk and h2load): the median round's.
    ratios['throughput_on_vs_naive_c16_h2load'] = roundRatio(h2load);
    log(`h2load rounds, on / naive: ${h2load.rounds.map((r) => `${roundRatio(r).toFixed(2)}`).join(', ')}`);
    const check = ratioCheck('throughput_on_vs_naive_c16_h2load', ratios['throughput_on_vs_naive_c16_h2load'], {
      atLeast: ON_OVER_NAIVE_C16,
    });
    log(`${check.pass ? 'PASS' : 'MISS'} ${check.target}: ${check.detail}`);
  }
  const result = { model: label, delayUs: DELAY_US, threads: THREADS, environment: env, points, paired, naive, h2load, ratios };
  log(`\n${formatPoints(points)}\n`);
  for (const [k, v] of Object.entries(ratios)) log(`${k}: ${v.toFixed(2)}`);
  if (paired.length > 0) log('paired in-process reference (windows just before and after the server measurement, server idle):');
  for (const p of paired) log(formatPaired(p));
  const protocols = [...new Set(points.map((p) => p.protocol))];
  const svg = latencyThroughputSvg(
    `${label}: p99 latency vs throughput (${protocols.join(', ')})`,
    ['mlp_off', 'mlp_on']
      .flatMap((m) =>
        protocols.flatMap((protocol) =>
          (['closed', 'open'] as const).map((loop) => ({
            name: `batching ${m === 'mlp_on' ? 'on' : 'off'}${protocols.length > 1 ? ` ${protocol}` : ''}${loop === 'open' ? ' (open loop)' : ''}`,
            dashed: loop === 'open',
            points: points
              .filter((p) => p.model === m && p.protocol === protocol && (p.rate === undefined) === (loop === 'closed'))
              .map((p) => ({
                x: p.client.throughput,
                y: p.client.latencyMs.p99,
                label: p.rate === undefined ? `c=${p.concurrency}` : `${p.rate}/s`,
              })),
          })),
        ),
      )
      .filter((series) => series.points.length > 0),
    'p99 latency (ms)',
  );
  const files = await writeResult(options.name ?? 'batching', result, svg);
  log(`wrote ${files.join(', ')}`);
  return result;
}

/**
 * The issue's targets at concurrency 16, per protocol: throughput and p99 of batching on over
 * batching off (for HTTP binary without a suffix, others suffixed with the protocol).
 */
export function batchingRatios(points: readonly Point[]): Record<string, number> {
  const ratios: Record<string, number> = {};
  for (const protocol of new Set(points.map((p) => p.protocol))) {
    const find = (m: string) =>
      points.find((x) => x.model === m && x.concurrency === 16 && x.rate === undefined && x.protocol === protocol);
    const off = find('mlp_off');
    const on = find('mlp_on');
    if (!off || !on) continue;
    const suffix = protocolSuffix(protocol);
    ratios[`throughput_on_vs_off_c16${suffix}`] = on.client.throughput / off.client.throughput;
    ratios[`p99_on_vs_off_c16${suffix}`] = on.client.latencyMs.p99 / off.client.latencyMs.p99;
  }
  return ratios;
}

/** The paired comparison of a batching-on point, from its reference windows. */
function pairedPoint(point: Point, windows: readonly ReferenceWindow[]): PairedPoint | undefined {
  const runMs = medianRunMs(windows);
  const { protocol, concurrency } = point;
  if (concurrency === 1) {
    const batch1 = runMs.get(1);
    if (batch1 === undefined) return undefined;
    const perWindow = windows.map((w) => w.runs.find((r) => r.batchSize === 1)?.runMs ?? NaN);
    return { protocol, concurrency, windows, comparison: latencyVsInProcess(point.client.latencyMs.p50, batch1), perWindow };
  }
  const comparison = throughputVsLimit({ throughput: point.client.throughput, ...point.server }, runMs);
  if (!comparison) return undefined;
  const perWindow = windows.map(
    (w) => samplesPerSecondOnBatches(point.server.batches, new Map(w.runs.map((r) => [r.batchSize, r.runMs]))) ?? NaN,
  );
  return { protocol, concurrency, windows, comparison, perWindow };
}

/** `c1_p50_over_in_process` and `server_vs_limit` per protocol, suffixed as in batchingRatios. */
export function pairedRatios(paired: readonly PairedPoint[]): Record<string, number> {
  const ratios: Record<string, number> = {};
  for (const p of paired) {
    const name = p.concurrency === 1 ? 'c1_p50_over_in_process' : 'server_vs_limit';
    ratios[`${name}${protocolSuffix(p.protocol)}`] = p.comparison[name]!;
  }
  return ratios;
}

function formatPaired(p: PairedPoint): string {
  const c = p.comparison;
  const windows = p.perWindow.map((v) => v.toFixed(p.concurrency === 1 ? 2 : 0)).join(', ');
  return p.concurrency === 1
    ? `  ${p.protocol} c=1: server p50 ${c['c1_server_p50_ms']!.toFixed(2)} ms over in-process batch 1 ` +
        `${c['in_process_batch1_ms']!.toFixed(2)} ms (median of the windows before and after: ${windows} ms)`
    : `  ${p.protocol} c=${p.concurrency}: server ${c['server_saturated_infer_per_s']!.toFixed(0)} infer/s (mean batch ` +
        `${c['server_avg_batch_size']!.toFixed(1)}) over in-process ${c['limit_on_formed_batches']!.toFixed(0)} samples/s ` +
        `on the same batches (windows before and after: ${windows}; at the mean batch: ${c['limit_at_mean_batch']!.toFixed(0)})`;
}

function protocolSuffix(protocol: Protocol): string {
  return protocol === 'http-binary' ? '' : `_${protocol.replace('-', '_')}`;
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

export function formatPoints(points: readonly Point[]): string {
  return table(
    [
      'model',
      'protocol',
      'load',
      'infer/s',
      'p50 ms',
      'p90 ms',
      'p95 ms',
      'p99 ms',
      'errors',
      'avg batch',
      'queue ms',
      'infer ms',
      'other cpu',
    ],
    points.map((p) => [
      p.model,
      p.protocol,
      p.rate === undefined ? `c=${p.concurrency}` : `${p.rate}/s`,
      p.client.throughput,
      p.client.latencyMs.p50,
      p.client.latencyMs.p90,
      p.client.latencyMs.p95,
      p.client.latencyMs.p99,
      p.client.notSent ? `${p.client.errors}+${p.client.notSent} unsent` : p.client.errors,
      p.server.avgBatchSize,
      p.server.avgQueueMs,
      p.server.avgComputeInferMs,
      p.cpu ? p.cpu.otherCores : '',
    ]),
  );
}
