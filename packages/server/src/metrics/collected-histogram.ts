import type { Histogram, Registry } from 'prom-client';

/**
 * One histogram series as plain numbers: observing is a bucket search and three additions,
 * with no label hashing. Prometheus semantics: an observation falls in the first bucket
 * whose upper bound is >= the value, or only in +Inf above the last bound.
 */
export class HistogramData {
  /** Observations per bucket, not cumulative. */
  private readonly perBucket: number[];
  sum = 0;
  count = 0;

  constructor(readonly upperBounds: readonly number[]) {
    this.perBucket = upperBounds.map(() => 0);
  }

  observe(value: number): void {
    const bounds = this.upperBounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        this.perBucket[i]!++;
        break;
      }
    }
    this.sum += value;
    this.count++;
  }

  /** Observations at or below each upper bound, in order. */
  cumulative(): number[] {
    let total = 0;
    return this.perBucket.map((n) => (total += n));
  }
}

type Labels = Readonly<Record<string, string>>;

/** A line of the exposition, in the shape prom-client's Histogram.get() gives. */
export interface HistogramValue {
  readonly metricName: string;
  readonly labels: Record<string, string | number>;
  readonly value: number;
}

/**
 * A Prometheus histogram whose series are read from HistogramData when scraped, so that
 * observing costs no label hashing or validation (prom-client does both on every call).
 * Registered in a prom-client Registry, it exposes what a prom-client Histogram with the
 * same name, help and buckets would after the same observations: cumulative
 * `_bucket{le=...}` lines, `le="+Inf"`, `_sum` and `_count`, labels in the same order, and a
 * series only once it has an observation.
 */
export class CollectedHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly series: () => Iterable<{ readonly labels: Labels; readonly data: HistogramData }>,
    registry: Registry,
  ) {
    // The registry only reads name, help, type, aggregator and get(): the contract of its metrics.
    registry.registerMetric(this as unknown as Histogram);
  }

  async get(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: HistogramValue[] }> {
    const values: HistogramValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const { labels, data } of this.series()) {
      if (data.count === 0) continue;
      const cumulative = data.cumulative();
      data.upperBounds.forEach((le, i) => values.push({ metricName: bucket, labels: { le, ...labels }, value: cumulative[i]! }));
      values.push({ metricName: bucket, labels: { le: '+Inf', ...labels }, value: data.count });
      values.push({ metricName: `${this.name}_sum`, labels: { ...labels }, value: data.sum });
      values.push({ metricName: `${this.name}_count`, labels: { ...labels }, value: data.count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** Registry.resetMetrics(): the values belong to the versions' series, which keep counting. */
  reset(): void {}
}
