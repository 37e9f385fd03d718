import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { CustomMetricMessage, PythonModelMetrics } from '../backends/python/model-metrics.ts';

type Family = { readonly kind: 'counter'; readonly metric: Counter } | { readonly kind: 'gauge'; readonly metric: Gauge } | HistogramFamily;
interface HistogramFamily {
  readonly kind: 'histogram';
  readonly description: string;
  /** prom-client fixes a histogram's buckets when it is made: one per bucket list, labelled alike. */
  readonly byBuckets: Map<string, Histogram>;
}

/**
 * Triton's custom metrics (pb_utils.MetricFamily: counters, gauges, histograms) of Python models,
 * exported on :8002 beside the server's own, and the count of Python processes that died. A family's
 * label names are fixed by its first metric (as prom-client requires); a metric with other label
 * names, or a name the server already uses, is dropped with the family's first error logged once.
 */
export class CustomMetrics implements PythonModelMetrics {
  private readonly families = new Map<string, Family>();
  private readonly refused = new Set<string>();
  private readonly deaths: Counter;

  constructor(
    private readonly registry: Registry,
    private readonly warn: (message: string) => void,
  ) {
    this.deaths = new Counter({
      name: 'batchwise_model_process_deaths_total',
      help: 'Python model processes that died (crashed, killed, or stopped after their execute timeout) and were restarted',
      labelNames: ['model', 'version'],
      registers: [registry],
    });
  }

  processDied(model: string, version: string): void {
    this.deaths.inc({ model, version });
  }

  customMetric(message: CustomMetricMessage): void {
    try {
      if (message.t === 'metric-family') this.declare(message);
      else this.change(message);
    } catch (error) {
      const family = message.t === 'metric-family' ? message.name : message.family;
      if (this.refused.has(family)) return;
      this.refused.add(family);
      this.warn(`custom metric family '${family}': ${(error as Error).message}`);
    }
  }

  private declare(message: Extract<CustomMetricMessage, { t: 'metric-family' }>): void {
    if (this.families.has(message.name)) return;
    if (message.kind === 'histogram') {
      this.families.set(message.name, { kind: 'histogram', description: message.description, byBuckets: new Map() });
      return;
    }
    // Label names are known only with the first metric: the family is made then.
    this.pendingFamilies.set(message.name, message);
  }

  private readonly pendingFamilies = new Map<string, Extract<CustomMetricMessage, { t: 'metric-family' }>>();

  private change(message: Extract<CustomMetricMessage, { t: 'metric' }>): void {
    const labelNames = Object.keys(message.labels).sort();
    let family = this.families.get(message.family);
    if (!family) {
      const declared = this.pendingFamilies.get(message.family);
      if (!declared) throw new Error('a metric of a family never declared');
      const options = { name: declared.name, help: declared.description || declared.name, labelNames, registers: [this.registry] };
      family =
        declared.kind === 'counter' ? { kind: 'counter', metric: new Counter(options) } : { kind: 'gauge', metric: new Gauge(options) };
      this.families.set(declared.name, family);
    }
    switch (family.kind) {
      case 'counter':
        family.metric.inc(message.labels, message.value);
        return;
      case 'gauge':
        if (message.op === 'set') family.metric.set(message.labels, message.value);
        else family.metric.inc(message.labels, message.value);
        return;
      case 'histogram': {
        const buckets = message.buckets ?? [];
        const key = buckets.join(',');
        let histogram = family.byBuckets.get(key);
        if (!histogram) {
          if (family.byBuckets.size > 0) throw new Error('every metric of a histogram family must have the same buckets here');
          histogram = new Histogram({
            name: message.family,
            help: family.description || message.family,
            labelNames,
            buckets: [...buckets],
            registers: [this.registry],
          });
          family.byBuckets.set(key, histogram);
        }
        histogram.observe(message.labels, message.value);
        return;
      }
    }
  }
}
