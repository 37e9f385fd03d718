import type { ExecutionTimings } from '../backends/backend.ts';
import type { DurationStat, ModelStatistics } from '../core/types.ts';
import type { ServerMetrics } from './server-metrics.ts';

type RequestInfo = { readonly batchSize: number; readonly arrivalNs: bigint };

const zero = (): DurationStat => ({ count: 0, ns: 0 });

/**
 * Statistics of one model version, kept in Triton's statistics-extension shape and mirrored
 * into Prometheus. Label children are bound once at load time, not per request.
 */
export class VersionStatistics {
  private readonly stats: ModelStatistics;
  private readonly batchStats = new Map<number, ModelStatistics['batch_stats'][number]>();
  private readonly m;
  private readonly failureCounters = new Map<string, { inc(): void }>();

  constructor(
    readonly modelName: string,
    readonly version: string,
    private readonly metrics: ServerMetrics,
  ) {
    this.stats = {
      name: modelName,
      version,
      last_inference: 0,
      inference_count: 0,
      execution_count: 0,
      inference_stats: {
        success: zero(), fail: zero(), queue: zero(), compute_input: zero(), compute_infer: zero(),
        compute_output: zero(), cache_hit: zero(), cache_miss: zero(),
      },
      batch_stats: [],
      memory_usage: [],
    };
    const labels = { model: modelName, version };
    this.m = {
      success: metrics.requestSuccess.labels(labels),
      inferenceCount: metrics.inferenceCount.labels(labels),
      executionCount: metrics.executionCount.labels(labels),
      requestUs: metrics.requestDurationUs.labels(labels),
      queueUs: metrics.queueDurationUs.labels(labels),
      inputUs: metrics.computeInputDurationUs.labels(labels),
      inferUs: metrics.computeInferDurationUs.labels(labels),
      outputUs: metrics.computeOutputDurationUs.labels(labels),
      requestSeconds: metrics.requestDurationSeconds.labels(labels),
      queueSeconds: metrics.queueDurationSeconds.labels(labels),
      computeSeconds: metrics.computeDurationSeconds.labels(labels),
      batchSize: metrics.batchSize.labels(labels),
      pending: metrics.pendingRequests.labels(labels),
      gpuOutOfMemory: metrics.gpuOutOfMemory.labels(labels),
      cacheHits: metrics.cacheHits.labels(labels),
      cacheHitUs: metrics.cacheHitDurationUs.labels(labels),
      cacheMisses: metrics.cacheMisses.labels(labels),
      cacheMissUs: metrics.cacheMissDurationUs.labels(labels),
    };
  }

  /** One model execution of `batchSize` samples. */
  recordExecution(batchSize: number, timings: ExecutionTimings): void {
    this.stats.execution_count++;
    let entry = this.batchStats.get(batchSize);
    if (!entry) {
      entry = { batch_size: batchSize, compute_input: zero(), compute_infer: zero(), compute_output: zero() };
      this.batchStats.set(batchSize, entry);
      this.stats.batch_stats.push(entry);
      this.stats.batch_stats.sort((a, b) => a.batch_size - b.batch_size);
    }
    add(entry.compute_input, timings.computeInputNs);
    add(entry.compute_infer, timings.computeInferNs);
    add(entry.compute_output, timings.computeOutputNs);
    this.m.executionCount.inc();
    this.m.batchSize.observe(batchSize);
    this.m.computeSeconds.observe((timings.computeInputNs + timings.computeInferNs + timings.computeOutputNs) / 1e9);
  }

  /** One request completed; compute timings are those of the batch it ran in, as Triton counts them. */
  recordSuccess(request: RequestInfo, queueNs: number, timings: ExecutionTimings): void {
    const now = process.hrtime.bigint();
    const totalNs = Number(now - request.arrivalNs);
    const s = this.stats.inference_stats;
    add(s.success, totalNs);
    add(s.queue, queueNs);
    add(s.compute_input, timings.computeInputNs);
    add(s.compute_infer, timings.computeInferNs);
    add(s.compute_output, timings.computeOutputNs);
    this.stats.inference_count += request.batchSize;
    this.stats.last_inference = Date.now();
    this.m.success.inc();
    this.m.inferenceCount.inc(request.batchSize);
    this.m.requestUs.inc(totalNs / 1e3);
    this.m.queueUs.inc(queueNs / 1e3);
    this.m.inputUs.inc(timings.computeInputNs / 1e3);
    this.m.inferUs.inc(timings.computeInferNs / 1e3);
    this.m.outputUs.inc(timings.computeOutputNs / 1e3);
    this.m.requestSeconds.observe(totalNs / 1e9);
    this.m.queueSeconds.observe(queueNs / 1e9);
  }

  /**
   * A request answered from the response cache: a success (as Triton counts it), with the
   * lookup time as cache_hit; not an inference or an execution.
   */
  recordCacheHit(request: { readonly arrivalNs: bigint }, lookupNs: number): void {
    const totalNs = Number(process.hrtime.bigint() - request.arrivalNs);
    add(this.stats.inference_stats.success, totalNs);
    add(this.stats.inference_stats.cache_hit, lookupNs);
    this.stats.last_inference = Date.now();
    this.m.success.inc();
    this.m.requestUs.inc(totalNs / 1e3);
    this.m.requestSeconds.observe(totalNs / 1e9);
    this.m.cacheHits.inc();
    this.m.cacheHitUs.inc(lookupNs / 1e3);
  }

  /** A request the cache did not hold: lookup and insertion time as cache_miss (its run is counted as usual). */
  recordCacheMiss(ns: number): void {
    add(this.stats.inference_stats.cache_miss, ns);
    this.m.cacheMisses.inc();
    this.m.cacheMissUs.inc(ns / 1e3);
  }

  /** A request that failed after it reached the model (rejected, timed out, or the run failed). */
  recordFailure(request: { readonly arrivalNs: bigint }, reason: 'REJECTED' | 'BACKEND' | 'OTHER' | 'CANCELED'): void {
    const totalNs = Number(process.hrtime.bigint() - request.arrivalNs);
    add(this.stats.inference_stats.fail, totalNs);
    this.stats.last_inference = Date.now();
    let counter = this.failureCounters.get(reason);
    if (!counter) {
      counter = this.metrics.requestFailure.labels({ model: this.modelName, version: this.version, reason });
      this.failureCounters.set(reason, counter);
    }
    counter.inc();
  }

  /** A request whose batch failed with a GPU out-of-memory (also counted as a BACKEND failure). */
  recordGpuOutOfMemory(): void {
    this.m.gpuOutOfMemory.inc();
  }

  setPending(count: number): void {
    this.m.pending.set(count);
  }

  snapshot(): ModelStatistics {
    return structuredClone(this.stats);
  }
}

function add(stat: DurationStat, ns: number): void {
  stat.count++;
  stat.ns += ns;
}
