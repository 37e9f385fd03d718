import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CollectedHistogram, HistogramData } from './collected-histogram.ts';

const BUCKETS = [0.0001, 0.001, 0.01, 1, 30];

describe('CollectedHistogram', () => {
  it("exposes what prom-client's Histogram does after the same observations", async () => {
    const observations: [string, number][] = [
      ['a', 0],
      ['a', 0.0001],
      ['a', 0.00010001],
      ['a', 0.5],
      ['a', 30],
      ['a', 31],
      ['a', 1e-9],
      ['b', 0.002],
      ['b', 0.003],
    ];
    const reference = new Registry();
    const histogram = new Histogram({
      name: 'h_seconds',
      help: 'help text',
      labelNames: ['model', 'version'],
      buckets: BUCKETS,
      registers: [reference],
    });
    const collected = new Registry();
    const series = new Map<string, { labels: { model: string; version: string }; data: HistogramData }>();
    for (const model of ['a', 'b', 'c']) series.set(model, { labels: { model, version: '1' }, data: new HistogramData(BUCKETS) });
    const metric = new CollectedHistogram('h_seconds', 'help text', () => series.values(), collected);
    for (const [model, value] of observations) {
      histogram.observe({ model, version: '1' }, value);
      series.get(model)!.data.observe(value);
    }
    // 'c' has no observation: no series, as with prom-client.
    expect(await collected.metrics()).toBe(await reference.metrics());
    const bucketsOf = (values: { metricName?: string; labels: object; value: number }[]) =>
      values.map((v) => ({ metricName: v.metricName, labels: v.labels, value: v.value }));
    expect(bucketsOf((await metric.get()).values)).toEqual(bucketsOf((await histogram.get()).values));
  });
});
