import { CloudWatchClient, GetMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import { EMF_DIMENSIONS, EMF_METRICS, EMF_NAMESPACE } from '../../metrics/emf-metrics.ts';
import { NO_FIGURES, type VersionFigures } from '../../metrics/canary-judge.ts';
import { figuresFromSamples, parsePrometheusSamples } from '../../metrics/prometheus-samples.ts';

/** What running servers report about a model's two versions, summed over the servers. */
export interface CanaryReading {
  readonly stable: VersionFigures;
  readonly canary: VersionFigures;
  /** Canary rollbacks the servers themselves made (batchwise_canary_rollbacks_total), cumulative. */
  readonly rollbacks: number;
}

/** Where `models canary --steps` reads the figures of running servers. */
export interface FiguresSource {
  /** Cumulative figures now (metrics endpoints), or since `sinceMs` (CloudWatch, which keeps intervals). */
  read(model: string, versions: { stable: string; canary: string }, sinceMs: number): Promise<CanaryReading>;
  /** Whether readings are cumulative (subtract the step's first from its last) or already per window. */
  readonly cumulative: boolean;
}

function addFigures(a: VersionFigures, b: VersionFigures): VersionFigures {
  const bounds = a.latencyBounds.length >= b.latencyBounds.length ? a.latencyBounds : b.latencyBounds;
  return {
    success: a.success + b.success,
    failure: a.failure + b.failure,
    latencyBounds: bounds,
    latencyCumulative: bounds.map((_, i) => (a.latencyCumulative[i] ?? 0) + (b.latencyCumulative[i] ?? 0)),
  };
}

/** The metrics endpoints of running servers (http://host:8002/metrics), scraped and summed. */
export function metricsEndpointSource(urls: readonly string[], fetchTimeoutMs = 10_000): FiguresSource {
  return {
    cumulative: true,
    async read(model, versions) {
      let reading: CanaryReading = { stable: NO_FIGURES, canary: NO_FIGURES, rollbacks: 0 };
      for (const url of urls) {
        const response = await fetch(url, { signal: AbortSignal.timeout(fetchTimeoutMs) });
        if (!response.ok) throw new Error(`metrics endpoint ${url} answered ${response.status}`);
        const samples = parsePrometheusSamples(await response.text());
        reading = {
          stable: addFigures(reading.stable, figuresFromSamples(samples, model, versions.stable)),
          canary: addFigures(reading.canary, figuresFromSamples(samples, model, versions.canary)),
          rollbacks:
            reading.rollbacks +
            samples
              .filter((s) => s.name === 'batchwise_canary_rollbacks_total' && s.labels['model'] === model)
              .reduce((t, s) => t + s.value, 0),
        };
      }
      return reading;
    },
  };
}

/**
 * CloudWatch (the EMF metrics of every task): the servers' own verdicts, CanaryRollbacks summed
 * over [ServiceName, Model] since the step began, over every ServiceName given (a stack's model
 * groups each write their own; only the group serving the model has its series). EMF lines carry no
 * version dimension, so the per-version comparison is the one each task made; the figures here stay
 * empty.
 */
export function cloudWatchSource(options: { region: string; serviceNames: readonly string[]; client?: CloudWatchClient }): FiguresSource {
  const client = options.client ?? new CloudWatchClient({ region: options.region });
  return {
    cumulative: false,
    async read(model, _versions, sinceMs) {
      const end = new Date();
      // GetMetricData wants whole minutes; a step shorter than that still reads the last minute.
      const start = new Date(Math.min(sinceMs, end.getTime() - 60_000));
      const result = await client.send(
        new GetMetricDataCommand({
          StartTime: start,
          EndTime: end,
          MetricDataQueries: options.serviceNames.map((serviceName, i) => ({
            Id: `rollbacks${i}`,
            MetricStat: {
              Metric: {
                Namespace: EMF_NAMESPACE,
                MetricName: EMF_METRICS.canaryRollbacks.name,
                Dimensions: [
                  { Name: EMF_DIMENSIONS.serviceName, Value: serviceName },
                  { Name: EMF_DIMENSIONS.model, Value: model },
                ],
              },
              Period: 60,
              Stat: 'Sum',
            },
          })),
        }),
      );
      const values = (result.MetricDataResults ?? []).flatMap((r) => r.Values ?? []);
      return { stable: NO_FIGURES, canary: NO_FIGURES, rollbacks: values.reduce((t, v) => t + v, 0) };
    },
  };
}
