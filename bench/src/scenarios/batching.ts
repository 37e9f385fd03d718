import { mlp } from '@batchwise/modelgen';
import { cpuShare, cpuSnapshot, type CpuShare } from '../cpu-usage.ts';
import { measure, type Load, type LoadResult, type WindowOptions } from '../load-generator.ts';
import { latencyThroughputSvg } from '../plot.ts';
import { environment, table, writeResult } from '../report.ts';
import { breakdown, readStats, type ServerBreakdown } from '../server-stats.ts';
import { startServerProcess } from '../server-process.ts';
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

export interface BatchingResult {
  readonly model: string;
  readonly points: Point[];
  readonly ratios: Record<string, number>;
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
}): Promise<BatchingResult> {
  const { model, log } = options;
  const label = `mlp-${model.layers}x${model.width}`;
  const file = await cachedModel(label, () => mlp({ layers: model.layers, width: model.width }), log);
  const repo = await benchRepository('batching', [
    { name: 'mlp_off', modelFile: file, config: fp32Config('mlp_off', { width: model.width, maxBatchSize: 64, batching: false, threads: THREADS }) },
    { name: 'mlp_on', modelFile: file, config: fp32Config('mlp_on', { width: model.width, maxBatchSize: 64, batching: true, delayUs: DELAY_US, threads: THREADS }) },
  ]);
  const env = environment();
  const server = await startServerProcess(['--model-repository', repo]);
  const points: Point[] = [];
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
          const { send, close } = inferRequest(server, protocol, name, model.width, concurrency);
          const pids = [process.pid, server.child.pid!];
          let before: Awaited<ReturnType<typeof readStats>> | undefined;
          let after: typeof before;
          let cpuBefore: ReturnType<typeof cpuSnapshot>;
          let cpuAfter: typeof cpuBefore;
          const result = await measure(`${name} ${protocol} ${tag}`, send, load, { ...options.windows, log }, {
            onMeasureStart: async () => {
              before = await readStats(server.httpUrl, name);
              cpuBefore = cpuSnapshot(pids);
            },
            onMeasureEnd: async () => {
              cpuAfter = cpuSnapshot(pids);
              after = await readStats(server.httpUrl, name);
            },
          });
          await close();
          const cpu = cpuShare(cpuBefore, cpuAfter);
          points.push({ model: name, protocol, concurrency, ...(rate !== undefined && { rate }), client: result, server: breakdown(before!, after!), ...(cpu && { cpu }) });
        }
      }
    }
  } finally {
    await server.stop();
  }
  const ratios = batchingRatios(points);
  const result = { model: label, delayUs: DELAY_US, threads: THREADS, environment: env, points, ratios };
  log(`\n${formatPoints(points)}\n`);
  for (const [k, v] of Object.entries(ratios)) log(`${k}: ${v.toFixed(2)}`);
  const protocols = [...new Set(points.map((p) => p.protocol))];
  const svg = latencyThroughputSvg(
    `${label}: p99 latency vs throughput (${protocols.join(', ')})`,
    ['mlp_off', 'mlp_on'].flatMap((m) =>
      protocols.flatMap((protocol) =>
        (['closed', 'open'] as const).map((loop) => ({
          name: `batching ${m === 'mlp_on' ? 'on' : 'off'}${protocols.length > 1 ? ` ${protocol}` : ''}${loop === 'open' ? ' (open loop)' : ''}`,
          dashed: loop === 'open',
          points: points
            .filter((p) => p.model === m && p.protocol === protocol && (p.rate === undefined) === (loop === 'closed'))
            .map((p) => ({ x: p.client.throughput, y: p.client.latencyMs.p99, label: p.rate === undefined ? `c=${p.concurrency}` : `${p.rate}/s` })),
        })),
      ),
    ).filter((series) => series.points.length > 0),
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
    const find = (m: string) => points.find((x) => x.model === m && x.concurrency === 16 && x.rate === undefined && x.protocol === protocol);
    const off = find('mlp_off');
    const on = find('mlp_on');
    if (!off || !on) continue;
    const suffix = protocol === 'http-binary' ? '' : `_${protocol.replace('-', '_')}`;
    ratios[`throughput_on_vs_off_c16${suffix}`] = on.client.throughput / off.client.throughput;
    ratios[`p99_on_vs_off_c16${suffix}`] = on.client.latencyMs.p99 / off.client.latencyMs.p99;
  }
  return ratios;
}

export function formatPoints(points: readonly Point[]): string {
  return table(
    ['model', 'protocol', 'load', 'infer/s', 'p50 ms', 'p90 ms', 'p95 ms', 'p99 ms', 'errors', 'avg batch', 'queue ms', 'infer ms', 'other cpu'],
    points.map((p) => [
      p.model, p.protocol, p.rate === undefined ? `c=${p.concurrency}` : `${p.rate}/s`, p.client.throughput, p.client.latencyMs.p50, p.client.latencyMs.p90,
      p.client.latencyMs.p95, p.client.latencyMs.p99, p.client.notSent ? `${p.client.errors}+${p.client.notSent} unsent` : p.client.errors, p.server.avgBatchSize, p.server.avgQueueMs, p.server.avgComputeInferMs,
      p.cpu ? p.cpu.otherCores : '',
    ]),
  );
}
