import type { MetricValue } from 'prom-client';
import { EMF_DIMENSIONS, EMF_MAX_VALUES_PER_METRIC, EMF_METRICS, EMF_NAMESPACE } from './emf-metrics.ts';
import type { EmfMetricKey } from './emf-metrics.ts';
import type { ServerMetrics } from './server-metrics.ts';

/**
 * CloudWatch embedded metric format: one JSON line per interval on stdout, which awslogs
 * ships and CloudWatch turns into metrics without an agent or API calls. The names, units
 * and dimensions are the contract with the infrastructure, declared in emf-metrics.ts.
 */
export { EMF_NAMESPACE };

/** A distribution in EMF's histogram form: `Values[i]` occurred `Counts[i]` times. */
export interface EmfDistribution {
  readonly Values: number[];
  readonly Counts: number[];
}
type EmfValue = number | EmfDistribution;

type MetricValues = Partial<Record<EmfMetricKey, EmfValue>>;

interface Totals {
  memoryRejections: number;
  success: number;
  failure: number;
  rejected: number;
  backend: number;
  pending: number;
  /** Gauge: 1 per model whose latest load failed. */
  failed: number;
  /** Canary rollbacks (batchwise_canary_rollbacks_total). */
  canaryRollbacks: number;
  /** Gauges of the sequence batcher (batchwise_sequence_active, ..._backlog): only for versions that have one. */
  sequences?: { active: number; backlog: number };
  /** Cumulative histogram buckets (upper bound -> count) of each histogram EMF carries. */
  histograms: Record<HistogramKey, Map<number, number>>;
}

const HISTOGRAMS = ['request', 'queue', 'compute', 'batchSize'] as const;
type HistogramKey = (typeof HISTOGRAMS)[number];

/** Many models per host: server-wide counters and histograms, carried on the service line. */
interface ModelTotals {
  loads: number;
  evictions: number;
  /** Cumulative buckets of the load phases and of the requests' waits. */
  histograms: Record<'download' | 'session' | 'wait', Map<number, number>>;
}

export interface EmfWriterOptions {
  readonly serviceName: string;
  readonly intervalMs?: number;
  readonly write?: (line: string) => void;
}

export class EmfWriter {
  private previous = new Map<string, Totals>();
  private previousModels: ModelTotals = emptyModelTotals();
  private timer: NodeJS.Timeout | undefined;
  private readonly write: (line: string) => void;

  constructor(
    private readonly metrics: ServerMetrics,
    private readonly options: EmfWriterOptions,
  ) {
    this.write = options.write ?? ((line) => process.stdout.write(`${line}\n`));
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.options.intervalMs ?? 10_000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }

  /** Writes the lines for the interval since the previous flush. */
  async flush(timestampMs = Date.now()): Promise<void> {
    const current = await this.totalsByModel();
    const overall: Totals = emptyTotals();
    for (const [model, now] of current) {
      const delta = subtract(now, this.previous.get(model) ?? emptyTotals());
      accumulate(overall, delta);
      if (model !== '') this.emit(timestampMs, { [EMF_DIMENSIONS.model]: model }, valuesOf(delta));
    }
    const memory = await this.memoryValues();
    const models = await this.modelTotals();
    this.emit(timestampMs, {}, { ...valuesOf(overall), ...memory, ...(await this.modelValues(models)) });
    this.previous = current;
    this.previousModels = models;
  }

  private emit(timestampMs: number, dimensions: Record<string, string>, values: MetricValues): void {
    const specs = (Object.keys(values) as EmfMetricKey[]).map((key) => EMF_METRICS[key]);
    const dimensionNames = [EMF_DIMENSIONS.serviceName, ...Object.keys(dimensions)];
    this.write(
      JSON.stringify({
        _aws: {
          Timestamp: timestampMs,
          CloudWatchMetrics: [
            { Namespace: EMF_NAMESPACE, Dimensions: [dimensionNames], Metrics: specs.map((m) => ({ Name: m.name, Unit: m.unit })) },
          ],
        },
        [EMF_DIMENSIONS.serviceName]: this.options.serviceName,
        ...dimensions,
        ...Object.fromEntries(Object.entries(values).map(([key, value]) => [EMF_METRICS[key as EmfMetricKey].name, value])),
      }),
    );
  }

  private async totalsByModel(): Promise<Map<string, Totals>> {
    const totals = new Map<string, Totals>();
    const of = (labels: MetricValue<string>['labels']) => {
      const model = String(labels['model'] ?? '');
      let t = totals.get(model);
      if (!t) totals.set(model, (t = emptyTotals()));
      return t;
    };
    for (const v of (await this.metrics.requestSuccess.get()).values) of(v.labels).success += v.value;
    for (const v of (await this.metrics.requestFailure.get()).values) {
      of(v.labels).failure += v.value;
      if (v.labels['reason'] === 'REJECTED') of(v.labels).rejected += v.value;
      if (v.labels['reason'] === 'BACKEND') of(v.labels).backend += v.value;
    }
    for (const v of (await this.metrics.pendingRequests.get()).values) of(v.labels).pending += v.value;
    for (const v of (await this.metrics.modelLoadFailed.get()).values) of(v.labels).failed += v.value;
    for (const v of (await this.metrics.canaryRollbacks.get()).values) of(v.labels).canaryRollbacks += v.value;
    const sequencesOf = (labels: MetricValue<string>['labels']) => (of(labels).sequences ??= { active: 0, backlog: 0 });
    for (const v of (await this.metrics.sequencesActive.get()).values) sequencesOf(v.labels).active += v.value;
    for (const v of (await this.metrics.sequenceBacklog.get()).values) sequencesOf(v.labels).backlog += v.value;
    const histograms = {
      request: this.metrics.requestDurationSeconds,
      queue: this.metrics.queueDurationSeconds,
      compute: this.metrics.computeDurationSeconds,
      batchSize: this.metrics.batchSize,
    };
    for (const key of HISTOGRAMS) {
      for (const v of (await histograms[key].get()).values) {
        const le = v.labels['le'];
        if (le === undefined || !v.metricName.endsWith('_bucket')) continue;
        const buckets = of(v.labels).histograms[key];
        const bound = le === '+Inf' ? Infinity : Number(le);
        buckets.set(bound, (buckets.get(bound) ?? 0) + v.value);
      }
    }
    totals.delete('');
    // Memory rejections happen before a request reaches a model: counted on the service-wide line.
    const memoryRejections = (await this.metrics.memoryRejections.get()).values[0]?.value ?? 0;
    totals.set('', { ...emptyTotals(), memoryRejections });
    return totals;
  }

  private async modelTotals(): Promise<ModelTotals> {
    const phases = (await this.metrics.modelLoadDurationByPhase.get()).values;
    return {
      loads: (await this.metrics.modelLoads.get()).values[0]?.value ?? 0,
      evictions: (await this.metrics.modelEvictions.get()).values[0]?.value ?? 0,
      histograms: {
        download: bucketsOf(phases, (labels) => labels['phase'] === 'download'),
        session: bucketsOf(phases, (labels) => labels['phase'] === 'session'),
        wait: bucketsOf((await this.metrics.loadWaitSeconds.get()).values),
      },
    };
  }

  /** The interval's loads, evictions and their times, and the gauges of what is loaded (issue 27). */
  private async modelValues(now: ModelTotals): Promise<MetricValues> {
    const before = this.previousModels;
    const values: MetricValues = { modelLoads: now.loads - before.loads, modelEvictions: now.evictions - before.evictions };
    const distributions = {
      modelDownloadTime: now.histograms.download,
      modelSessionTime: now.histograms.session,
      loadWaitTime: now.histograms.wait,
    } as const;
    const previous = {
      modelDownloadTime: before.histograms.download,
      modelSessionTime: before.histograms.session,
      loadWaitTime: before.histograms.wait,
    };
    for (const [key, buckets] of Object.entries(distributions) as [keyof typeof distributions, Map<number, number>][]) {
      const distribution = distributionFromCumulativeBuckets(bucketDelta(buckets, previous[key]), 1000);
      if (distribution) values[key] = distribution;
    }
    const gauge = async (metric: { get(): Promise<{ values: MetricValue<string>[] }> }) => (await metric.get()).values;
    values.modelsLoaded = (await gauge(this.metrics.modelsLoaded))[0]?.value ?? 0;
    values.modelMemoryBytes = (await gauge(this.metrics.modelMemoryBytes))[0]?.value ?? 0;
    const limit = (await gauge(this.metrics.modelMemoryLimitBytes))[0]?.value ?? 0;
    if (limit > 0) values.modelMemoryLimitBytes = limit;
    const gpus = await gauge(this.metrics.modelGpuMemoryBytes);
    if (gpus.length > 0) values.modelGpuMemoryBytes = Math.max(...gpus.map((v) => v.value));
    const cacheBytes = (await gauge(this.metrics.modelCacheBytes))[0]?.value ?? 0;
    const cacheLimit = (await gauge(this.metrics.modelCacheLimitBytes))[0]?.value ?? 0;
    if (cacheBytes > 0 || cacheLimit > 0) values.modelCacheBytes = cacheBytes;
    return values;
  }

  private async memoryValues(): Promise<MetricValues> {
    const values: MetricValues = {};
    const gpu = (await this.metrics.gpuMemoryUsedBytes.get()).values;
    if (gpu.length > 0) values.gpuMemoryUsedBytes = gpu.reduce((sum, v) => sum + v.value, 0);
    const utilization = (await this.metrics.gpuUtilization.get()).values;
    if (utilization.length > 0) values.gpuUtilization = (100 * utilization.reduce((sum, v) => sum + v.value, 0)) / utilization.length;
    const budget = (await this.metrics.memoryBudgetBytes.get()).values[0]?.value;
    const accounted = (await this.metrics.memoryAccountedBytes.get()).values[0]?.value;
    if (budget !== undefined && budget > 0) values.memoryBudgetBytes = budget;
    if (accounted !== undefined) values.memoryAccountedBytes = accounted;
    return values;
  }
}

function emptyModelTotals(): ModelTotals {
  return { loads: 0, evictions: 0, histograms: { download: new Map(), session: new Map(), wait: new Map() } };
}

/** A histogram's cumulative buckets (upper bound -> count), of the samples whose labels `keep` accepts. */
function bucketsOf(values: readonly MetricValue<string>[], keep: (labels: MetricValue<string>['labels']) => boolean = () => true) {
  const buckets = new Map<number, number>();
  for (const v of values) {
    const le = v.labels['le'];
    if (le === undefined || !keep(v.labels)) continue;
    const bound = le === '+Inf' ? Infinity : Number(le);
    buckets.set(bound, (buckets.get(bound) ?? 0) + v.value);
  }
  return buckets;
}

/** Each bucket's count in the interval: now less before. */
function bucketDelta(now: ReadonlyMap<number, number>, before: ReadonlyMap<number, number>): Map<number, number> {
  return new Map([...now].map(([le, count]) => [le, count - (before.get(le) ?? 0)]));
}

function emptyTotals(): Totals {
  const histograms = Object.fromEntries(HISTOGRAMS.map((key) => [key, new Map()])) as Totals['histograms'];
  return { memoryRejections: 0, success: 0, failure: 0, rejected: 0, backend: 0, pending: 0, failed: 0, canaryRollbacks: 0, histograms };
}

function subtract(now: Totals, before: Totals): Totals {
  const histograms = emptyTotals().histograms;
  for (const key of HISTOGRAMS) {
    for (const [le, count] of now.histograms[key]) histograms[key].set(le, count - (before.histograms[key].get(le) ?? 0));
  }
  return {
    memoryRejections: now.memoryRejections - before.memoryRejections,
    success: now.success - before.success,
    failure: now.failure - before.failure,
    rejected: now.rejected - before.rejected,
    backend: now.backend - before.backend,
    pending: now.pending,
    failed: now.failed,
    canaryRollbacks: now.canaryRollbacks - before.canaryRollbacks,
    ...(now.sequences && { sequences: { ...now.sequences } }),
    histograms,
  };
}

function accumulate(into: Totals, delta: Totals): void {
  into.memoryRejections += delta.memoryRejections;
  into.success += delta.success;
  into.failure += delta.failure;
  into.rejected += delta.rejected;
  into.backend += delta.backend;
  into.pending += delta.pending;
  into.failed += delta.failed;
  into.canaryRollbacks += delta.canaryRollbacks;
  if (delta.sequences) {
    into.sequences ??= { active: 0, backlog: 0 };
    into.sequences.active += delta.sequences.active;
    into.sequences.backlog += delta.sequences.backlog;
  }
  for (const key of HISTOGRAMS) {
    const buckets = into.histograms[key];
    for (const [le, count] of delta.histograms[key]) buckets.set(le, (buckets.get(le) ?? 0) + count);
  }
}

function valuesOf(t: Totals): MetricValues {
  const values: MetricValues = {
    requestCount: t.success + t.failure,
    requestFailures: t.failure,
    backendFailures: t.backend,
    queueRejections: t.rejected,
    memoryRejections: t.memoryRejections,
    pendingRequests: t.pending,
    modelsFailedToLoad: t.failed,
    canaryRollbacks: t.canaryRollbacks,
  };
  if (t.sequences) {
    values.sequencesActive = t.sequences.active;
    values.sequenceBacklog = t.sequences.backlog;
  }
  const distributions = {
    requestLatency: distributionFromCumulativeBuckets(t.histograms.request, 1000),
    queueLatency: distributionFromCumulativeBuckets(t.histograms.queue, 1000),
    computeLatency: distributionFromCumulativeBuckets(t.histograms.compute, 1000),
    batchSize: distributionAtUpperBounds(t.histograms.batchSize),
  };
  for (const [key, distribution] of Object.entries(distributions)) if (distribution) values[key as EmfMetricKey] = distribution;
  return values;
}

/**
 * Whole-number observations (batch sizes) as an EMF distribution at each bucket's upper bound:
 * exact for buckets one wide (1, 2), an upper bound for the others (a batch of 3 counts as 4),
 * where spreading inside the bucket would invent fractional sizes.
 */
export function distributionAtUpperBounds(buckets: ReadonlyMap<number, number>): EmfDistribution | undefined {
  const Values: number[] = [];
  const Counts: number[] = [];
  let below = 0;
  let lastFinite = 0;
  for (const [upper, cumulative] of [...buckets.entries()].sort((a, b) => a[0] - b[0])) {
    const count = cumulative - below;
    below = cumulative;
    if (Number.isFinite(upper)) lastFinite = upper;
    if (count <= 0) continue;
    const value = Number.isFinite(upper) ? upper : lastFinite;
    if (Values.at(-1) === value) Counts[Counts.length - 1]! += count;
    else {
      Values.push(value);
      Counts.push(count);
    }
  }
  return Values.length > 0 ? { Values, Counts } : undefined;
}

/**
 * The interval's observations as an EMF distribution, from cumulative histogram buckets
 * (upper bound -> count, as Prometheus keeps them). Each bucket's requests are spread evenly
 * over points inside the bucket (the uniform assumption of Prometheus' histogram_quantile), so
 * CloudWatch's percentiles interpolate within a bucket instead of jumping to its upper edge;
 * at most EMF_MAX_VALUES_PER_METRIC values. Requests above the last finite bound count at
 * that bound. `scale` converts the bounds' unit (seconds -> milliseconds: 1000).
 */
export function distributionFromCumulativeBuckets(buckets: ReadonlyMap<number, number>, scale = 1): EmfDistribution | undefined {
  const sorted = [...buckets.entries()].sort((a, b) => a[0] - b[0]);
  const perBucket: Array<{ lower: number; upper: number; count: number }> = [];
  let lower = 0;
  let below = 0;
  for (const [upper, cumulative] of sorted) {
    const count = cumulative - below;
    if (count > 0) perBucket.push({ lower, upper: Number.isFinite(upper) ? upper : lower, count });
    below = cumulative;
    if (Number.isFinite(upper)) lower = upper;
  }
  if (perBucket.length === 0) return undefined;
  const pointsPerBucket = Math.max(1, Math.floor(EMF_MAX_VALUES_PER_METRIC / perBucket.length));
  const Values: number[] = [];
  const Counts: number[] = [];
  for (const { lower: lo, upper: hi, count } of perBucket) {
    const points = hi > lo ? Math.min(pointsPerBucket, count) : 1;
    for (let i = 0; i < points; i++) {
      // Largest-remainder split: the bucket's count spread over its points, whole numbers.
      const share = Math.round(((i + 1) * count) / points) - Math.round((i * count) / points);
      if (share === 0) continue;
      Values.push(round((lo + ((i + 0.5) / points) * (hi - lo)) * scale));
      Counts.push(share);
    }
  }
  return { Values, Counts };
}

/** Six significant digits keep the JSON line short without moving a percentile. */
function round(value: number): number {
  return Number(value.toPrecision(6));
}
