import ort from 'onnxruntime-node';
import { cpuSessionOptions } from '@batchwise/server/test-support/session-options.ts';
import { cpuShare, cpuSnapshot, type CpuShare } from './cpu-usage.ts';
import { summarize } from '@batchwise/client/load';

/**
 * The bench models run in-process through ONNX Runtime, on the bench process's main thread:
 * the reference the server is compared with (`limit` scenario, and the paired reference of the
 * `batching` scenario). Session options are the server's for the model's config.pbtxt (the
 * server's own function builds them): CPU execution provider, the intra-op threads and
 * `session.*` config entries of its parameters, and the server's defaults for the rest.
 */

/** Runs of each batch size in a window at least, whatever the window's length. */
const MIN_RUNS = 3;

/** One batch size's runs in a window. */
export interface ReferenceRun {
  readonly batchSize: number;
  /** Median run time (ms) in the window. */
  readonly runMs: number;
  readonly runs: number;
}

/** A short stretch of in-process runs. */
export interface ReferenceWindow {
  /** When it started (ISO time). */
  readonly at: string;
  readonly durationMs: number;
  readonly runs: readonly ReferenceRun[];
  /** CPU of the pids given (the bench process; in `batching` also the idle server) and of anything else. */
  readonly cpu?: CpuShare;
}

export interface InProcessModel {
  /**
   * Runs the batch sizes in turn (round-robin: 1, 2, ..., 1, 2, ...) until `durationMs` has
   * passed and each ran `MIN_RUNS` times, after one untimed run of each (the first run of a
   * shape allocates). Round-robin rather than size after size, so that a drift of the machine
   * during the window touches every size alike, and because the server too runs batches of
   * changing sizes one after another. Nothing else may run in this process meanwhile:
   * `session.run` blocks the event loop.
   */
  window(batchSizes: readonly number[], durationMs: number, pids?: readonly number[]): Promise<ReferenceWindow>;
  /**
   * Runs the mix of batches the server ran (`batches`: executions per batch size), interleaved
   * evenly, until `durationMs` has passed, after one untimed run of each size: rows per second of
   * wall time and per CPU-second of this process (process.cpuUsage, ONNX Runtime's threads
   * included, their wake-ups and spinning between runs too).
   */
  replay(batches: Readonly<Record<number, number>>, durationMs: number, pids?: readonly number[]): Promise<ReplayWindow>;
  release(): Promise<void>;
}

/** In-process runs of the server's batches (InProcessModel.replay). */
export interface ReplayWindow {
  /** When it started (ISO time). */
  readonly at: string;
  readonly durationMs: number;
  readonly runs: number;
  readonly rows: number;
  /** CPU time of the bench process over the window (ms). */
  readonly cpuMs: number;
  readonly rowsPerSecond: number;
  readonly rowsPerCpuSecond: number;
  /** CPU of the pids given and of anything else. */
  readonly cpu?: CpuShare;
}

/**
 * An MLP from @batchwise/modelgen (input `INPUT0`, [batch, width] FP32) in an in-process session
 * with the options the server gives it under `config` (its config.pbtxt).
 */
export async function openInProcess(options: { file: string; width: number; config: string }): Promise<InProcessModel> {
  const session = await ort.InferenceSession.create(options.file, cpuSessionOptions(options.config));
  const inputs = new Map<number, ort.Tensor>();
  const input = (batchSize: number) => {
    let tensor = inputs.get(batchSize);
    if (!tensor) {
      tensor = new ort.Tensor('float32', new Float32Array(batchSize * options.width).fill(0.5), [batchSize, options.width]);
      inputs.set(batchSize, tensor);
    }
    return tensor;
  };
  return {
    async window(batchSizes, durationMs, pids = [process.pid]) {
      const sizes = [...new Set(batchSizes)].sort((a, b) => a - b);
      for (const size of sizes) await session.run({ INPUT0: input(size) });
      const times = sizes.map(() => [] as number[]);
      const at = new Date().toISOString();
      const cpuBefore = cpuSnapshot(pids);
      const start = performance.now();
      while (performance.now() - start < durationMs || times.some((t) => t.length < MIN_RUNS)) {
        for (let i = 0; i < sizes.length; i++) {
          const tensor = input(sizes[i]!);
          const t0 = performance.now();
          await session.run({ INPUT0: tensor });
          times[i]!.push(performance.now() - t0);
        }
      }
      const elapsedMs = performance.now() - start;
      const cpu = cpuShare(cpuBefore, cpuSnapshot(pids));
      const runs = sizes.map((batchSize, i) => ({ batchSize, runMs: summarize(times[i]!).p50, runs: times[i]!.length }));
      return { at, durationMs: elapsedMs, runs, ...(cpu && { cpu }) };
    },
    async replay(batches, durationMs, pids = [process.pid]) {
      const sequence = interleave(batches);
      if (sequence.length === 0) throw new Error('no batches to replay');
      for (const size of new Set(sequence)) await session.run({ INPUT0: input(size) });
      const at = new Date().toISOString();
      const cpuBefore = cpuSnapshot(pids);
      const usage = process.cpuUsage();
      const start = performance.now();
      let runs = 0;
      let rows = 0;
      while (performance.now() - start < durationMs) {
        const size = sequence[runs % sequence.length]!;
        await session.run({ INPUT0: input(size) });
        runs++;
        rows += size;
      }
      const elapsedMs = performance.now() - start;
      const used = process.cpuUsage(usage);
      const cpuMs = (used.user + used.system) / 1000;
      const cpu = cpuShare(cpuBefore, cpuSnapshot(pids));
      return {
        at,
        durationMs: elapsedMs,
        runs,
        rows,
        cpuMs,
        rowsPerSecond: (rows * 1000) / elapsedMs,
        rowsPerCpuSecond: (rows * 1000) / cpuMs,
        ...(cpu && { cpu }),
      };
    },
    async release() {
      inputs.clear();
      await session.release();
    },
  };
}

/**
 * Every batch of `batches` (executions per batch size) once, the sizes spread evenly: a size run
 * n times sits at (i + 0.5) / n of the way for i < n, so any stretch of the sequence holds the
 * sizes in about the server's proportions.
 */
export function interleave(batches: Readonly<Record<number, number>>): number[] {
  return Object.entries(batches)
    .flatMap(([size, count]) => Array.from({ length: count }, (_, i) => ({ size: Number(size), at: (i + 0.5) / count })))
    .sort((a, b) => a.at - b.at || a.size - b.size)
    .map((b) => b.size);
}

export function samplesPerSecond(batchSize: number, runMs: number): number {
  return (batchSize * 1000) / runMs;
}

/** Run time per batch size: the median of its run times over the windows that measured it. */
export function medianRunMs(windows: readonly ReferenceWindow[]): Map<number, number> {
  const bySize = new Map<number, number[]>();
  for (const w of windows) for (const r of w.runs) bySize.set(r.batchSize, [...(bySize.get(r.batchSize) ?? []), r.runMs]);
  return new Map([...bySize].sort(([a], [b]) => a - b).map(([size, ms]) => [size, median(ms)]));
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** In-process samples/s at a (fractional) batch size, linear between measured sizes. */
export function interpolate(rows: readonly { batchSize: number; samplesPerSecond: number }[], batchSize: number): number {
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

/**
 * In-process samples/s on exactly the batches the server ran (`batches`: executions per batch
 * size): their samples over the in-process run time of the same batches. Undefined when a size
 * has no run time.
 *
 * This, not the samples/s at the server's mean batch size, is the limit the server is compared
 * with: the server's batches are spread (at c=32 on 2026-11-23: 149 batches of 1, 219 of 27-31
 * and 254 in between, mean 13.5), so the mean is a batch it rarely ran, and samples/s at the
 * mean equals the throughput of the real mix only where run time is exactly linear in the batch
 * size, which ONNX Runtime's kernels (batch 1 included) do not promise. It costs one run time
 * per size formed instead of two (floor and ceil of the mean), a second or two per window.
 */
export function samplesPerSecondOnBatches(
  batches: Readonly<Record<number, number>>,
  runMs: ReadonlyMap<number, number>,
): number | undefined {
  let samples = 0;
  let ms = 0;
  for (const [size, count] of Object.entries(batches).map(([s, c]) => [Number(s), c] as const)) {
    const run = runMs.get(size);
    if (run === undefined) return undefined;
    samples += size * count;
    ms += run * count;
  }
  return ms > 0 ? (samples * 1000) / ms : undefined;
}

/** What the server did at its saturated point, from the batching result. */
export interface ServerThroughput {
  readonly throughput: number;
  readonly avgBatchSize: number;
  readonly batches: Readonly<Record<number, number>>;
}

/**
 * `server_vs_limit`: the server's throughput over the in-process samples/s on the same batches
 * (see samplesPerSecondOnBatches); `limit_at_mean_batch`, samples/s interpolated at the mean
 * batch size, is given beside it for comparison with earlier runs. Undefined when a batch size
 * the server ran has no in-process run time.
 */
export function throughputVsLimit(server: ServerThroughput, runMs: ReadonlyMap<number, number>): Record<string, number> | undefined {
  const limit = samplesPerSecondOnBatches(server.batches, runMs);
  if (limit === undefined) return undefined;
  const rows = [...runMs].map(([batchSize, ms]) => ({ batchSize, samplesPerSecond: samplesPerSecond(batchSize, ms) }));
  return {
    server_saturated_infer_per_s: server.throughput,
    server_avg_batch_size: server.avgBatchSize,
    limit_on_formed_batches: limit,
    limit_at_mean_batch: interpolate(rows, server.avgBatchSize),
    server_vs_limit: server.throughput / limit,
  };
}

/** `c1_p50_over_in_process`: the server's p50 at concurrency 1 over the in-process batch-1 run time. */
export function latencyVsInProcess(serverP50Ms: number, batch1RunMs: number): Record<string, number> {
  return { c1_server_p50_ms: serverP50Ms, in_process_batch1_ms: batch1RunMs, c1_p50_over_in_process: serverP50Ms / batch1RunMs };
}

/** The ratio names with a target (a protocol suffix may follow, as in the batching ratios). */
export const REFERENCE_RATIOS = ['c1_p50_over_in_process', 'server_vs_limit'] as const;
