import type { ExecutionTimings } from '../backends/backend.ts';
import type { DurationStat, LatencyObjectiveStatistics, ModelStatistics } from '../protocol/types.ts';
import type { ServerMetrics } from './server-metrics.ts';
import type { FailureReason, ObjectiveShedReason, SequenceFigures, VersionSeries } from './version-series.ts';

type RequestInfo = { readonly batchSize: number; readonly arrivalNs: bigint };

const zero = (): DurationStat => ({ count: 0, ns: 0 });

export { FAILURE_REASONS, type FailureReason } from './version-series.ts';

/**
 * Statistics of one model version, kept in Triton's statistics-extension shape (from this
 * load on) and added to the version's VersionSeries, which ServerMetrics publishes to
 * Prometheus when scraped (cumulative over every load of the version).
 */
export class VersionStatistics {
  private readonly stats: ModelStatistics;
  private readonly batchStats = new Map<number, ModelStatistics['batch_stats'][number]>();
  private readonly series: VersionSeries;
  private latencyObjective: (() => LatencyObjectiveStatistics) | undefined;

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
        success: zero(),
        fail: zero(),
        queue: zero(),
        compute_input: zero(),
        compute_infer: zero(),
        compute_output: zero(),
        cache_hit: zero(),
        cache_miss: zero(),
      },
      batch_stats: [],
      memory_usage: [],
      response_stats: {},
    };
    // Triton exports a version's counters and pending gauge from the moment it loads, at 0.
    this.series = metrics.versionSeries(modelName, version);
    this.series.pending = 0;
    this.series.latencyObjective = undefined;
    if (this.series.sequences) this.series.idleReleasesBefore += this.series.sequences().idleReleases;
    this.series.sequences = undefined;
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
    const series = this.series;
    series.executions++;
    series.batchSize.observe(batchSize);
    series.computeSeconds.observe((timings.computeInputNs + timings.computeInferNs + timings.computeOutputNs) / 1e9);
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
    const series = this.series;
    series.success++;
    series.inferences += request.batchSize;
    series.requestNs += totalNs;
    series.queueNs += queueNs;
    series.computeInputNs += timings.computeInputNs;
    series.computeInferNs += timings.computeInferNs;
    series.computeOutputNs += timings.computeOutputNs;
    series.requestSeconds.observe(totalNs / 1e9);
    series.queueSeconds.observe(queueNs / 1e9);
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
    const series = this.series;
    series.success++;
    series.requestNs += totalNs;
    series.requestSeconds.observe(totalNs / 1e9);
    series.cacheHits++;
    series.cacheHitNs += lookupNs;
  }

  /** A request the cache did not hold: lookup and insertion time as cache_miss (its run is counted as usual). */
  recordCacheMiss(ns: number): void {
    add(this.stats.inference_stats.cache_miss, ns);
    this.series.cacheMisses++;
    this.series.cacheMissNs += ns;
  }

  /** A request that failed after it reached the model (rejected, timed out, or the run failed). */
  recordFailure(request: { readonly arrivalNs: bigint }, reason: FailureReason): void {
    const totalNs = Number(process.hrtime.bigint() - request.arrivalNs);
    add(this.stats.inference_stats.fail, totalNs);
    this.stats.last_inference = Date.now();
    this.series.failures[reason]++;
  }

  /** A request whose batch failed with a GPU out-of-memory (also counted as a BACKEND failure). */
  recordGpuOutOfMemory(): void {
    this.series.gpuOutOfMemory++;
  }

  /**
   * A batch got the rate limiter's grant after waiting `ns` (0 when its resources were free):
   * the Batchwise extension field batchwise_rate_limiter_wait of the statistics.
   */
  recordRateLimiterWait(ns: number): void {
    add((this.stats.batchwise_rate_limiter_wait ??= zero()), ns);
    this.series.rateLimiterGrants++;
    this.series.rateLimiterWaitNs += ns;
    this.series.rateLimiterWaitSeconds.observe(ns / 1e9);
  }

  /**
   * A request refused because it would miss the latency objective: a failure (REJECTED, as
   * Triton counts a scheduler's refusals) and, by where it was refused, in
   * batchwise_latency_objective_shed_total.
   */
  recordObjectiveShed(request: { readonly arrivalNs: bigint }, where: ObjectiveShedReason): void {
    this.recordFailure(request, 'REJECTED');
    this.series.objectiveShed[where]++;
  }

  /** The batcher's latency-objective state, shown in snapshots (batchwise_latency_objective) and metrics. */
  observeLatencyObjective(read: () => LatencyObjectiveStatistics): void {
    this.latencyObjective = read;
    this.series.latencyObjective = read;
  }

  /** The sequence batcher's figures, published as the batchwise_sequence_* metrics. */
  observeSequences(read: () => SequenceFigures): void {
    this.series.sequences = read;
  }

  /** Requests queued and not yet executing (Triton's nv_inference_pending_request_count). */
  setPending(count: number): void {
    this.series.pending = count;
  }

  snapshot(): ModelStatistics {
    const snapshot = structuredClone(this.stats);
    if (this.latencyObjective) snapshot.batchwise_latency_objective = this.latencyObjective();
    return snapshot;
  }
}

function add(stat: DurationStat, ns: number): void {
  stat.count++;
  stat.ns += ns;
}
