import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { ServerMetrics } from './server-metrics.ts';

/**
 * CloudWatch embedded metric format: one JSON line per interval on stdout, which awslogs
 * ships and CloudWatch turns into metrics without an agent or API calls. The names, units
 * and dimensions are the contract with the infrastructure (infra/lib/server-metrics.ts).
 */
export const EMF_NAMESPACE = 'Batchwise';

type Unit = 'Count' | 'Milliseconds' | 'Bytes';
const UNITS: Record<string, Unit> = {
  RequestCount: 'Count',
  RequestFailures: 'Count',
  QueueRejections: 'Count',
  MemoryRejections: 'Count',
  PendingRequests: 'Count',
  RequestLatencyP99: 'Milliseconds',
  GpuMemoryUsedBytes: 'Bytes',
  MemoryAccountedBytes: 'Bytes',
  MemoryBudgetBytes: 'Bytes',
};

interface Totals {
  memoryRejections: number;
  success: number;
  failure: number;
  rejected: number;
  pending: number;
  buckets: Map<number, number>;
}

export interface EmfWriterOptions {
  readonly serviceName: string;
  readonly intervalMs?: number;
  readonly write?: (line: string) => void;
}

export class EmfWriter {
  private previous = new Map<string, Totals>();
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
      if (model !== '') this.emit(timestampMs, { Model: model }, valuesOf(delta));
    }
    const memory = await this.memoryValues();
    this.emit(timestampMs, {}, { ...valuesOf(overall), ...memory });
    this.previous = current;
  }

  private emit(timestampMs: number, dimensions: Record<string, string>, values: Record<string, number>): void {
    const names = Object.keys(values);
    const dimensionNames = ['ServiceName', ...Object.keys(dimensions)];
    this.write(
      JSON.stringify({
        _aws: {
          Timestamp: timestampMs,
          CloudWatchMetrics: [
            { Namespace: EMF_NAMESPACE, Dimensions: [dimensionNames], Metrics: names.map((n) => ({ Name: n, Unit: UNITS[n] ?? 'Count' })) },
          ],
        },
        ServiceName: this.options.serviceName,
        ...dimensions,
        ...values,
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
    }
    for (const v of (await this.metrics.pendingRequests.get()).values) of(v.labels).pending += v.value;
    const histogram = (await this.metrics.requestDurationSeconds.get()) as MetricObjectWithValues<MetricValue<string>>;
    for (const v of histogram.values) {
      const le = v.labels['le'];
      if (le === undefined || !('metricName' in v) || !String(v.metricName).endsWith('_bucket')) continue;
      const t = of(v.labels);
      const bound = le === '+Inf' ? Infinity : Number(le);
      t.buckets.set(bound, (t.buckets.get(bound) ?? 0) + v.value);
    }
    totals.delete('');
    // Memory rejections happen before a request reaches a model: counted on the service-wide line.
    const memoryRejections = (await this.metrics.memoryRejections.get()).values[0]?.value ?? 0;
    totals.set('', { ...emptyTotals(), memoryRejections });
    return totals;
  }

  private async memoryValues(): Promise<Record<string, number>> {
    const values: Record<string, number> = {};
    const gpu = (await this.metrics.gpuMemoryUsedBytes.get()).values;
    if (gpu.length > 0) values['GpuMemoryUsedBytes'] = gpu.reduce((sum, v) => sum + v.value, 0);
    const budget = (await this.metrics.memoryBudgetBytes.get()).values[0]?.value;
    const accounted = (await this.metrics.memoryAccountedBytes.get()).values[0]?.value;
    if (budget !== undefined && budget > 0) values['MemoryBudgetBytes'] = budget;
    if (accounted !== undefined) values['MemoryAccountedBytes'] = accounted;
    return values;
  }
}

function emptyTotals(): Totals {
  return { memoryRejections: 0, success: 0, failure: 0, rejected: 0, pending: 0, buckets: new Map() };
}

function subtract(now: Totals, before: Totals): Totals {
  const buckets = new Map<number, number>();
  for (const [le, count] of now.buckets) buckets.set(le, count - (before.buckets.get(le) ?? 0));
  return {
    memoryRejections: now.memoryRejections - before.memoryRejections,
    success: now.success - before.success,
    failure: now.failure - before.failure,
    rejected: now.rejected - before.rejected,
    pending: now.pending,
    buckets,
  };
}

function accumulate(into: Totals, delta: Totals): void {
  into.memoryRejections += delta.memoryRejections;
  into.success += delta.success;
  into.failure += delta.failure;
  into.rejected += delta.rejected;
  into.pending += delta.pending;
  for (const [le, count] of delta.buckets) into.buckets.set(le, (into.buckets.get(le) ?? 0) + count);
}

function valuesOf(t: Totals): Record<string, number> {
  const values: Record<string, number> = {
    RequestCount: t.success + t.failure,
    RequestFailures: t.failure,
    QueueRejections: t.rejected,
    MemoryRejections: t.memoryRejections,
    PendingRequests: t.pending,
  };
  const p99 = quantileFromCumulativeBuckets(t.buckets, 0.99);
  if (p99 !== undefined) values['RequestLatencyP99'] = p99 * 1000;
  return values;
}

/** Upper bound of the bucket holding quantile q (Prometheus buckets are cumulative). */
export function quantileFromCumulativeBuckets(buckets: ReadonlyMap<number, number>, q: number): number | undefined {
  const sorted = [...buckets.entries()].sort((a, b) => a[0] - b[0]);
  const total = sorted.at(-1)?.[1] ?? 0;
  if (total <= 0) return undefined;
  const target = q * total;
  for (const [le, count] of sorted) {
    if (count >= target) return Number.isFinite(le) ? le : sorted.at(-2)?.[0];
  }
  return undefined;
}
