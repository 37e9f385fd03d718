import { mlp } from '@batchwise/modelgen';
import { measure, type LoadResult, type WindowOptions } from '../load-generator.ts';
import { latencyThroughputSvg } from '../plot.ts';
import { table, writeResult } from '../report.ts';
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

export interface Point {
  readonly model: string;
  readonly protocol: Protocol;
  readonly concurrency: number;
  readonly client: LoadResult;
  readonly server: ServerBreakdown;
}

export interface BatchingResult {
  readonly model: string;
  readonly points: Point[];
  readonly ratios: Record<string, number>;
}

/** The MLP served with batching off and on, over a sweep of concurrencies. */
export async function runBatching(options: {
  model: BatchingModel;
  concurrencies: readonly number[];
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
  const server = await startServerProcess(['--model-repository', repo]);
  const points: Point[] = [];
  try {
    for (const protocol of options.protocols ?? ['http-binary']) {
      for (const name of ['mlp_off', 'mlp_on']) {
        for (const concurrency of options.concurrencies) {
          const { send, client } = inferRequest(server, protocol, name, model.width, concurrency);
          const before = await readStats(server.httpUrl, name);
          const result = await measure(`${name} ${protocol} c=${concurrency}`, send, { concurrency }, { ...options.windows, log });
          const after = await readStats(server.httpUrl, name);
          await client.close();
          points.push({ model: name, protocol, concurrency, client: result, server: breakdown(before, after) });
        }
      }
    }
  } finally {
    await server.stop();
  }
  const find = (m: string, c: number, p: Protocol = 'http-binary') => points.find((x) => x.model === m && x.concurrency === c && x.protocol === p);
  const at16 = [find('mlp_off', 16), find('mlp_on', 16)];
  const ratios: Record<string, number> = {};
  if (at16[0] && at16[1]) {
    ratios['throughput_on_vs_off_c16'] = at16[1].client.throughput / at16[0].client.throughput;
    ratios['p99_on_vs_off_c16'] = at16[1].client.latencyMs.p99 / at16[0].client.latencyMs.p99;
  }
  const result = { model: label, points, ratios };
  log(`\n${formatPoints(points)}\n`);
  for (const [k, v] of Object.entries(ratios)) log(`${k}: ${v.toFixed(2)}`);
  const svg = latencyThroughputSvg(
    `${label}: p99 latency vs throughput (HTTP binary)`,
    ['mlp_off', 'mlp_on'].flatMap((m) =>
      [...new Set(points.map((p) => p.protocol))].map((protocol) => ({
        name: `${m === 'mlp_on' ? 'batching on' : 'batching off'} ${protocol}`,
        points: points.filter((p) => p.model === m && p.protocol === protocol).map((p) => ({ x: p.client.throughput, y: p.client.latencyMs.p99 })),
      })),
    ),
    'p99 latency (ms)',
  );
  const files = await writeResult(options.name ?? 'batching', result, svg);
  log(`wrote ${files.join(', ')}`);
  return result;
}

export function formatPoints(points: readonly Point[]): string {
  return table(
    ['model', 'protocol', 'conc', 'infer/s', 'p50 ms', 'p90 ms', 'p95 ms', 'p99 ms', 'errors', 'avg batch', 'queue ms', 'infer ms'],
    points.map((p) => [
      p.model, p.protocol, p.concurrency, p.client.throughput, p.client.latencyMs.p50, p.client.latencyMs.p90,
      p.client.latencyMs.p95, p.client.latencyMs.p99, p.client.errors, p.server.avgBatchSize, p.server.avgQueueMs, p.server.avgComputeInferMs,
    ]),
  );
}
