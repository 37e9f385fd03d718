/**
 * The contract between the server and this stack: metrics the server publishes in
 * CloudWatch embedded metric format (EMF) when started with `--cloudwatch-metrics`.
 *
 * The server writes one EMF JSON line to stdout every 10 seconds with aggregates over
 * that interval; awslogs ships it to CloudWatch Logs, which extracts the metrics (no
 * PutMetricData, no agent). Every line carries the `ServiceName` dimension (the value of
 * `--cloudwatch-service-name`), and per-model lines also carry `Model`, so each metric
 * exists for the dimension sets `[ServiceName]` and `[ServiceName, Model]`.
 *
 * Names, units and dimensions are declared once, by the server (emf-metrics.ts, a module
 * without imports that synth loads directly), as are the names of the settings the stack passes
 * (options/environment.ts, likewise); this file only adds how the stack reads each metric. A metric the server adds without a statistic here fails to type-check.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { EMF_DIMENSIONS, EMF_METRICS, EMF_NAMESPACE } from '../../packages/server/src/metrics/emf-metrics.ts';
import type { EmfMetricKey, EmfMetricSpec } from '../../packages/server/src/metrics/emf-metrics.ts';

export const SERVER_METRICS_NAMESPACE = EMF_NAMESPACE;

export const SERVER_METRIC_DIMENSIONS = EMF_DIMENSIONS;

/** How a metric aggregates across tasks and 10 s samples. */
export type ServerMetricStatistic = 'Sum' | 'Average' | 'Maximum' | 'p99';

export interface ServerMetricSpec extends EmfMetricSpec {
  /** Statistic that makes sense across tasks and 10 s samples. */
  readonly statistic: ServerMetricStatistic;
}

const STATISTICS: Readonly<Record<EmfMetricKey, ServerMetricStatistic>> = {
  requestCount: 'Sum',
  requestFailures: 'Sum',
  backendFailures: 'Sum',
  queueRejections: 'Sum',
  memoryRejections: 'Sum',
  // A gauge per task: the average is the load per task that autoscaling tracks.
  pendingRequests: 'Average',
  // A distribution from every task: CloudWatch's p99 over all requests of all tasks.
  requestLatency: 'p99',
  queueLatency: 'p99',
  computeLatency: 'p99',
  batchSize: 'p99',
  // A gauge per task: the busiest task's GPUs.
  gpuUtilization: 'Maximum',
  gpuMemoryUsedBytes: 'Maximum',
  memoryAccountedBytes: 'Maximum',
  memoryBudgetBytes: 'Maximum',
  // A gauge per task: the task with the most failed models.
  modelsFailedToLoad: 'Maximum',
  // Rollbacks in every task: one is enough to alarm.
  canaryRollbacks: 'Sum',
  // Many models per host: loads and evictions of every task; load and wait times across tasks.
  modelLoads: 'Sum',
  modelEvictions: 'Sum',
  modelDownloadTime: 'p99',
  modelSessionTime: 'p99',
  loadWaitTime: 'p99',
  // Gauges per task: the fullest task.
  modelsLoaded: 'Maximum',
  modelMemoryBytes: 'Maximum',
  modelMemoryLimitBytes: 'Maximum',
  modelGpuMemoryBytes: 'Maximum',
  modelCacheBytes: 'Maximum',
  // The sequence batcher: gauges per task (a sequence stays on its task), the fullest task.
  sequencesActive: 'Maximum',
  sequenceBacklog: 'Maximum',
};

export const SERVER_METRICS = Object.fromEntries(
  (Object.keys(EMF_METRICS) as EmfMetricKey[]).map((key) => [key, { ...EMF_METRICS[key], statistic: STATISTICS[key] }]),
) as { readonly [K in EmfMetricKey]: (typeof EMF_METRICS)[K] & { readonly statistic: ServerMetricStatistic } };

/** A server EMF metric at the `[ServiceName]` dimension set, with its natural statistic. */
export function serverMetric(spec: ServerMetricSpec, serviceName: string, period: Duration = Duration.minutes(1)): cloudwatch.Metric {
  return new cloudwatch.Metric({
    namespace: SERVER_METRICS_NAMESPACE,
    metricName: spec.name,
    dimensionsMap: { [SERVER_METRIC_DIMENSIONS.serviceName]: serviceName },
    statistic: spec.statistic,
    period,
  });
}

/**
 * The secret-bearing env var the server reads to restrict the model-repository API, and the
 * request header that must carry that key: named by the server's options declaration.
 */
export { MODEL_REPOSITORY_KEY_ENV, MODEL_REPOSITORY_KEY_HEADER } from '../../packages/server/src/options/environment.ts';
export { SEQUENCE_COOKIE } from '../../packages/server/src/protocol/sequence-cookie.ts';
