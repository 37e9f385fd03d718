import type { ExecutionTimings } from '../backends/backend.ts';
import type { DurationStat, ModelStatistics } from '../core/types.ts';
import type { ServerMetrics } from './server-metrics.ts';

type RequestInfo = { readonly batchSize: number; readonly arrivalNs: bigint };

const zero = (): DurationStat => ({ count: 0, ns: 0 });

/** Triton's reasons for nv_inference_request_failure; every one is exported (at 0) once a version loads. */
export const FAILURE_REASONS = ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER'] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];

/**
 * A Prometheus counter of microseconds fed nanoseconds. It counts whole microseconds, as
 * Triton's integer *_duration_us counters do, and carries the sub-microsecond rest to the
 * next addition, so that nothing is lost over many requests.
 */
class MicrosecondCounter {
  private restNs = 0;

  constructor(private readonly counter: { inc(value: number): void }) {}

  addNs(ns: number): void {
    const totalNs = this.restNs + ns;
    const us = Math.floor(totalNs / 1000);
    this.restNs = totalNs - us * 1000;
    if (us > 0) this.counter.inc(us);
  }
}

/**
 * Statistics of one model version, kept in Triton's statistics-extension shape and mirrored
 * into Prometheus. Label children are bound once at load time, not per request.
 */
export class VersionStatistics {
  private readonly stats: ModelStatistics;
  private readonly batchStats = new Map<number, ModelStatistics['batch_stats'][number]>();
  private readonly m;
  private readonly failureCounters: ReadonlyMap<FailureReason, { inc(): void }>;

  constructor(
    readonly modelName: string,
    readonly version: string,
    metrics: ServerMetrics,
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
      response_stats: {},
    };
    const labels = { model: modelName, version };
    // Triton exports a version's counters and pending gauge from the moment it loads, at 0.
    const counter = <T extends { inc(value?: number): void }>(child: T): T => (child.inc(0), child);
    this.m = {
      success: counter(metrics.requestSuccess.labels(labels)),
      inferenceCount: counter(metrics.inferenceCount.labels(labels)),
      executionCount: counter(metrics.executionCount.labels(labels)),
      requestUs: new MicrosecondCounter(counter(metrics.requestDurationUs.labels(labels))),
      queueUs: new MicrosecondCounter(counter(metrics.queueDurationUs.labels(labels))),
      inputUs: new MicrosecondCounter(counter(metrics.computeInputDurationUs.labels(labels))),
      inferUs: new MicrosecondCounter(counter(metrics.computeInferDurationUs.labels(labels))),
      outputUs: new MicrosecondCounter(counter(metrics.computeOutputDurationUs.labels(labels))),
      requestSeconds: metrics.requestDurationSeconds.labels(labels),
      queueSeconds: metrics.queueDurationSeconds.labels(labels),
      computeSeconds: metrics.computeDurationSeconds.labels(labels),
      batchSize: metrics.batchSize.labels(labels),
      pending: metrics.pendingRequests.labels(labels),
      gpuOutOfMemory: metrics.gpuOutOfMemory.labels(labels),
      cacheHits: metrics.cacheHits.labels(labels),
      cacheHitUs: new MicrosecondCounter(metrics.cacheHitDurationUs.labels(labels)),
      cacheMisses: metrics.cacheMisses.labels(labels),
      cacheMissUs: new MicrosecondCounter(metrics.cacheMissDurationUs.labels(labels)),
    };
    this.m.pending.set(0);
    this.failureCounters = new Map(
      FAILURE_REASONS.map((reason) => [reason, counter(metrics.requestFailure.labels({ ...labels, reason }))]),
    );
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
    this.m.requestUs.addNs(totalNs);
    this.m.queueUs.addNs(queueNs);
    this.m.inputUs.addNs(timings.computeInputNs);
    this.m.inferUs.addNs(timings.computeInferNs);
    this.m.outputUs.addNs(timings.computeOutputNs);
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
    this.m.requestUs.addNs(totalNs);
    this.m.requestSeconds.observe(totalNs / 1e9);
    this.m.cacheHits.inc();
    this.m.cacheHitUs.addNs(lookupNs);
  }

  /** A request the cache did not hold: lookup and insertion time as cache_miss (its run is counted as usual). */
  recordCacheMiss(ns: number): void {
    add(this.stats.inference_stats.cache_miss, ns);
    this.m.cacheMisses.inc();
    this.m.cacheMissUs.addNs(ns);
  }

  /** A request that failed after it reached the model (rejected, timed out, or the run failed). */
  recordFailure(request: { readonly arrivalNs: bigint }, reason: FailureReason): void {
    const totalNs = Number(process.hrtime.bigint() - request.arrivalNs);
    add(this.stats.inference_stats.fail, totalNs);
    this.stats.last_inference = Date.now();
    this.failureCounters.get(reason)!.inc();
  }

  /** A request whose batch failed with a GPU out-of-memory (also counted as a BACKEND failure). */
  recordGpuOutOfMemory(): void {
    this.m.gpuOutOfMemory.inc();
  }

  /** Requests queued and not yet executing (Triton's nv_inference_pending_request_count). */
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
