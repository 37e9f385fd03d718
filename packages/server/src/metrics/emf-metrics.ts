/**
 * The CloudWatch embedded metric format (EMF) contract, declared once: the names, units and
 * dimensions the server writes (emf-writer.ts) and the infrastructure's alarms, dashboard and
 * autoscaling read (infra/lib/server-metrics.ts imports this file). No imports: infra loads it
 * at synth time without the server's dependencies.
 */
export const EMF_NAMESPACE = 'Batchwise';

/** Every line carries `ServiceName`; per-model lines also carry `Model`. */
export const EMF_DIMENSIONS = { serviceName: 'ServiceName', model: 'Model' } as const;

/** CloudWatch units as they appear in the EMF `Unit` field. */
export type EmfUnit = 'Count' | 'Milliseconds' | 'Bytes' | 'Percent';

export interface EmfMetricSpec {
  readonly name: string;
  readonly unit: EmfUnit;
  readonly description: string;
}

/**
 * Most EMF values one metric may carry in one line (the EMF specification's array limit), here
 * the length of a `{ Values, Counts }` distribution.
 */
export const EMF_MAX_VALUES_PER_METRIC = 100;

export const EMF_METRICS = {
  requestCount: {
    name: 'RequestCount',
    unit: 'Count',
    description: 'Inference requests completed (success or failure) in the interval.',
  },
  requestFailures: {
    name: 'RequestFailures',
    unit: 'Count',
    description: 'Inference requests that failed, for any reason (including invalid input), in the interval.',
  },
  backendFailures: {
    name: 'BackendFailures',
    unit: 'Count',
    description:
      "Requests whose model execution failed (Triton's failure reason BACKEND, e.g. CUDA out of memory): " +
      'server errors on both protocols, whatever status the frontend answered with.',
  },
  queueRejections: {
    name: 'QueueRejections',
    unit: 'Count',
    description: 'Requests rejected because a model queue was full or its queue timeout expired.',
  },
  memoryRejections: {
    name: 'MemoryRejections',
    unit: 'Count',
    description: 'Requests refused by the memory guard (--memory-limit).',
  },
  pendingRequests: {
    name: 'PendingRequests',
    unit: 'Count',
    description: 'Requests queued in this task at the end of the interval (gauge).',
  },
  requestLatency: {
    name: 'RequestLatency',
    unit: 'Milliseconds',
    description:
      'End-to-end latency inside the server of successful requests, as a distribution ({ Values, Counts }) ' +
      'over the interval, so CloudWatch computes percentiles (p99) across tasks. Resolution: the ' +
      'latency histogram buckets, interpolated linearly inside each bucket.',
  },
  queueLatency: {
    name: 'QueueLatency',
    unit: 'Milliseconds',
    description:
      'Time successful requests waited in the scheduler queue, as a distribution over the interval (as RequestLatency, ' +
      'from the queue histogram).',
  },
  computeLatency: {
    name: 'ComputeLatency',
    unit: 'Milliseconds',
    description: 'Time to run one batch (input, infer, output), as a distribution over the interval (from the compute histogram).',
  },
  batchSize: {
    name: 'BatchSize',
    unit: 'Count',
    description:
      'Samples per model execution, as a distribution over the interval at the batch-size buckets (1, 2, 4 .. 256): ' +
      'a batch of 3 counts as 4.',
  },
  gpuUtilization: {
    name: 'GpuUtilization',
    unit: 'Percent',
    description: "Utilization of the task's GPUs, averaged over them (gauge, from nvidia-smi), 0 .. 100.",
  },
  gpuMemoryUsedBytes: {
    name: 'GpuMemoryUsedBytes',
    unit: 'Bytes',
    description: "GPU memory in use on the task's GPUs (gauge, from nvidia-smi).",
  },
  memoryAccountedBytes: {
    name: 'MemoryAccountedBytes',
    unit: 'Bytes',
    description: "Host memory the server's memory guard has accounted (requests, batches, buffers).",
  },
  memoryBudgetBytes: {
    name: 'MemoryBudgetBytes',
    unit: 'Bytes',
    description: 'The memory guard budget, i.e. the --memory-limit value (constant per task).',
  },
  modelsFailedToLoad: {
    name: 'ModelsFailedToLoad',
    unit: 'Count',
    description:
      'Models this task should serve whose latest load failed (batchwise_model_load_failed), at the end of the ' +
      "interval (gauge): their number on the service line, 1 or 0 on a model's line.",
  },
  canaryRollbacks: {
    name: 'CanaryRollbacks',
    unit: 'Count',
    description:
      'Canary versions a task stopped sending unversioned requests to in the interval, because they were worse than ' +
      'the stable version (batchwise_canary_rollbacks_total; see docs/canary-releases.md).',
  },
  // Many models per host (issue 27): on the service line only.
  modelLoads: {
    name: 'ModelLoads',
    unit: 'Count',
    description: 'Model versions loaded in the interval: at start-up, by polls, by load requests and by requests (--load-on-demand).',
  },
  modelEvictions: {
    name: 'ModelEvictions',
    unit: 'Count',
    description:
      'Models evicted in the interval to make room under --model-memory-limit (the least recently used with nothing in flight): ' +
      'many per minute is thrash, models evicted and loaded again, which the eviction alarm watches.',
  },
  modelDownloadTime: {
    name: 'ModelDownloadTime',
    unit: 'Milliseconds',
    description: "Time loads spent bringing a model's files into the local cache (S3), as a distribution over the interval.",
  },
  modelSessionTime: {
    name: 'ModelSessionTime',
    unit: 'Milliseconds',
    description: "Time loads spent opening and warming up a version's instances, as a distribution over the interval.",
  },
  loadWaitTime: {
    name: 'LoadWaitTime',
    unit: 'Milliseconds',
    description:
      'How long requests waited for their model to load (--load-on-demand), as a distribution over the interval: its ' +
      'SampleCount is the number of requests that waited.',
  },
  modelsLoaded: {
    name: 'ModelsLoaded',
    unit: 'Count',
    description: 'Models with a version serving at the end of the interval (gauge).',
  },
  modelMemoryBytes: {
    name: 'ModelMemoryBytes',
    unit: 'Bytes',
    description: "Host memory the loaded model versions take by the memory guard's estimate (gauge): what --model-memory-limit bounds.",
  },
  modelMemoryLimitBytes: {
    name: 'ModelMemoryLimitBytes',
    unit: 'Bytes',
    description: 'The --model-memory-limit value (constant per task; absent without one).',
  },
  modelGpuMemoryBytes: {
    name: 'ModelGpuMemoryBytes',
    unit: 'Bytes',
    description: "Memory the loaded model versions take on the task's fullest GPU (gauge): what --model-gpu-memory-limit bounds.",
  },
  modelCacheBytes: {
    name: 'ModelCacheBytes',
    unit: 'Bytes',
    description: 'Bytes of model versions in the local cache of the s3:// repositories (gauge), which --model-cache-disk-limit bounds.',
  },
  // The sequence batcher (issue 28): on the lines of models with sequence_batching, and on the service line while one is loaded.
  sequencesActive: {
    name: 'SequencesActive',
    unit: 'Count',
    description:
      "Sequences the sequence batcher holds, in a slot or waiting in the backlog, at the end of the interval (gauge): a model's, " +
      'or all of the task on the service line.',
  },
  sequenceBacklog: {
    name: 'SequenceBacklog',
    unit: 'Count',
    description: 'Sequences waiting in the backlog for a slot at the end of the interval (gauge): above 0 while every slot is held.',
  },
} as const satisfies Record<string, EmfMetricSpec>;

export type EmfMetricKey = keyof typeof EMF_METRICS;
