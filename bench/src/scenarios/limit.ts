import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import ort from 'onnxruntime-node';
import { mlp } from '@batchwise/modelgen';
import { cpuShare, cpuSnapshot, type CpuShare } from '../cpu-usage.ts';
import { summarize } from '../stats.ts';
import { environment, RESULTS_DIR, table, writeResult } from '../report.ts';
import { cachedModel } from '../workload.ts';
import { THREADS, type BatchingModel, type BatchingResult } from './batching.ts';

export interface LimitRow {
  readonly batchSize: number;
  readonly runMs: number;
  readonly samplesPerSecond: number;
  readonly cpu?: CpuShare;
}

/**
 * The same model in-process through ONNX Runtime with the same threads: the physical limit
 * the server is measured against, at the batch sizes the server formed.
 */
export async function runLimit(options: {
  model: BatchingModel;
  batchSizes?: readonly number[];
  durationMs: number;
  log: (line: string) => void;
  /** Result file name. @default 'limit' */
  name?: string;
  /** The batching run to compare with (bench/results/<name>.json). @default 'batching' */
  batchingName?: string;
}): Promise<{ rows: LimitRow[]; comparison: Record<string, number> }> {
  const { model, log } = options;
  const env = environment();
  const file = await cachedModel(`mlp-${model.layers}x${model.width}`, () => mlp({ layers: model.layers, width: model.width }), log);
  const session = await ort.InferenceSession.create(file, { executionProviders: ['cpu'], intraOpNumThreads: THREADS });
  const batchingFile = join(RESULTS_DIR, `${options.batchingName ?? 'batching'}.json`);
  const label = `mlp-${model.layers}x${model.width}`;
  const batching = await readFile(batchingFile, 'utf8').then(
    (t) => JSON.parse(t) as BatchingResult,
    () => undefined,
  );
  if (!batching) log(`no ${batchingFile}: measuring the default batch sizes, nothing to compare with (run the batching scenario first)`);
  else if (batching.model !== label) throw new Error(`${batchingFile} measured ${batching.model}, not ${label}: run the batching scenario with the same model`);
  else log(`comparing with ${batchingFile} (measured ${(batching as { environment?: { date?: string } }).environment?.date ?? 'at an unknown date'})`);
  const formed = batching
    ? [...new Set(batching.points.flatMap((p) => Object.keys(p.server.batches).map(Number)))].sort((a, b) => a - b)
    : [];
  const sizes = options.batchSizes ?? (formed.length > 0 ? formed : [1, 2, 4, 8, 16, 32, 64]);
  const rows: LimitRow[] = [];
  for (const batchSize of sizes) {
    const input = new ort.Tensor('float32', new Float32Array(batchSize * model.width).fill(0.5), [batchSize, model.width]);
    await session.run({ INPUT0: input });
    const times: number[] = [];
    const cpuBefore = cpuSnapshot([process.pid]);
    const start = performance.now();
    while (performance.now() - start < options.durationMs || times.length < 3) {
      const t0 = performance.now();
      await session.run({ INPUT0: input });
      times.push(performance.now() - t0);
    }
    const cpu = cpuShare(cpuBefore, cpuSnapshot([process.pid]));
    const runMs = summarize(times).p50;
    rows.push({ batchSize, runMs, samplesPerSecond: (batchSize * 1000) / runMs, ...(cpu && { cpu }) });
    log(`  in-process batch ${batchSize}: ${runMs.toFixed(2)} ms/run, ${((batchSize * 1000) / runMs).toFixed(0)} samples/s`);
  }
  await session.release();

  const comparison: Record<string, number> = {};
  if (batching) {
    const on = batching.points.filter((p) => p.model === 'mlp_on' && p.protocol === 'http-binary');
    const saturated = on.reduce((a, b) => (b.client.throughput > a.client.throughput ? b : a), on[0]!);
    if (saturated) {
      const nearest = rows.reduce((a, b) => (Math.abs(b.batchSize - saturated.server.avgBatchSize) < Math.abs(a.batchSize - saturated.server.avgBatchSize) ? b : a));
      const interpolated = interpolate(rows, saturated.server.avgBatchSize);
      comparison['server_saturated_infer_per_s'] = saturated.client.throughput;
      comparison['server_avg_batch_size'] = saturated.server.avgBatchSize;
      comparison['limit_at_that_batch_size'] = interpolated;
      comparison['server_vs_limit'] = saturated.client.throughput / interpolated;
      comparison['nearest_measured_batch'] = nearest.batchSize;
    }
    const c1 = batching.points.find((p) => p.model === 'mlp_on' && p.concurrency === 1 && p.protocol === 'http-binary');
    const b1 = rows.find((r) => r.batchSize === 1);
    if (c1 && b1) {
      comparison['c1_server_p50_ms'] = c1.client.latencyMs.p50;
      comparison['in_process_batch1_ms'] = b1.runMs;
      comparison['c1_p50_over_in_process'] = c1.client.latencyMs.p50 / b1.runMs;
    }
  }
  log(`\n${table(['batch', 'ms/run', 'samples/s', 'other cpu'], rows.map((r) => [r.batchSize, r.runMs, r.samplesPerSecond, r.cpu?.otherCores ?? '']))}\n`);
  for (const [k, v] of Object.entries(comparison)) log(`${k}: ${v.toFixed(3)}`);
  await writeResult(options.name ?? 'limit', { model: label, threads: THREADS, environment: env, rows, comparison });
  return { rows, comparison };
}

/** In-process samples/s at a (fractional) batch size, linear between measured sizes. */
function interpolate(rows: readonly LimitRow[], batchSize: number): number {
  const sorted = [...rows].sort((a, b) => a.batchSize - b.batchSize);
  if (batchSize <= sorted[0]!.batchSize) return sorted[0]!.samplesPerSecond;
  for (let i = 1; i < sorted.length; i++) {
    const a = sorted[i - 1]!;
    const b = sorted[i]!;
    if (batchSize <= b.batchSize) {
      const t = (batchSize - a.batchSize) / (b.batchSize - a.batchSize);
      return a.samplesPerSecond + t * (b.samplesPerSecond - a.samplesPerSecond);
    }
  }
  return sorted.at(-1)!.samplesPerSecond;
}
