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
 * Alarms, the dashboard and service autoscaling read these names: renaming one here
 * without changing the server (packages/server/src/metrics/) silently breaks them.
 */
export const SERVER_METRICS_NAMESPACE = 'Batchwise';

export const SERVER_METRIC_DIMENSIONS = {
  serviceName: 'ServiceName',
  model: 'Model',
} as const;

/** CloudWatch units as they appear in the EMF `Unit` field. */
export type EmfUnit = 'Count' | 'Milliseconds' | 'Bytes';

export interface ServerMetricSpec {
  readonly name: string;
  readonly unit: EmfUnit;
  /** Statistic that makes sense across tasks and 10 s samples. */
  readonly statistic: 'Sum' | 'Average' | 'Maximum';
  readonly description: string;
}

export const SERVER_METRICS = {
  requestCount: {
    name: 'RequestCount', unit: 'Count', statistic: 'Sum',
    description: 'Inference requests completed (success or failure) in the interval.',
  },
  requestFailures: {
    name: 'RequestFailures', unit: 'Count', statistic: 'Sum',
    description: 'Inference requests that failed, for any reason, in the interval.',
  },
  queueRejections: {
    name: 'QueueRejections', unit: 'Count', statistic: 'Sum',
    description: 'Requests rejected because a model queue was full or its queue timeout expired.',
  },
  memoryRejections: {
    name: 'MemoryRejections', unit: 'Count', statistic: 'Sum',
    description: 'Requests or model loads refused by the memory guard (--memory-limit).',
  },
  pendingRequests: {
    name: 'PendingRequests', unit: 'Count', statistic: 'Average',
    description: 'Requests queued or executing in this task at the end of the interval (gauge).',
  },
  requestLatencyP99: {
    name: 'RequestLatencyP99', unit: 'Milliseconds', statistic: 'Maximum',
    description: '99th percentile of end-to-end request latency over the interval.',
  },
  gpuMemoryUsedBytes: {
    name: 'GpuMemoryUsedBytes', unit: 'Bytes', statistic: 'Maximum',
    description: 'GPU memory in use on the task\'s GPU (gauge).',
  },
  memoryAccountedBytes: {
    name: 'MemoryAccountedBytes', unit: 'Bytes', statistic: 'Maximum',
    description: 'Host memory the server\'s memory guard has accounted (models, batches, buffers).',
  },
  memoryBudgetBytes: {
    name: 'MemoryBudgetBytes', unit: 'Bytes', statistic: 'Maximum',
    description: 'The memory guard budget, i.e. the --memory-limit value (constant per task).',
  },
} as const satisfies Record<string, ServerMetricSpec>;

/** The secret-bearing env var the server reads to restrict the model-repository API. */
export const MODEL_REPOSITORY_KEY_ENV = 'BATCHWISE_MODEL_REPOSITORY_KEY';
/** Request header that must carry that key (Triton's `--http-restricted-api` key). */
export const MODEL_REPOSITORY_KEY_HEADER = 'batchwise-key';
