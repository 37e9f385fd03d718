import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

const MODEL_LABELS = ['model', 'version'] as const;

/** Latency buckets in seconds, 100 µs .. 30 s: fine enough for p99 across replicas. */
const LATENCY_BUCKETS_SECONDS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];
const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/**
 * Every metric the server exports, declared once. Names and labels of the nv_* family are
 * Triton's, so existing dashboards work; the batchwise_* histograms are what Triton lacks.
 */
export class ServerMetrics {
  readonly registry = new Registry();

  readonly requestSuccess = this.counter('nv_inference_request_success', 'Number of successful inference requests, all batch sizes');
  readonly requestFailure = new Counter({
    name: 'nv_inference_request_failure',
    help: 'Number of failed inference requests, all batch sizes',
    labelNames: [...MODEL_LABELS, 'reason'],
    registers: [this.registry],
  });
  readonly inferenceCount = this.counter('nv_inference_count', 'Number of inferences performed (does not include cached requests)');
  readonly executionCount = this.counter('nv_inference_exec_count', 'Number of model executions performed (does not include cached requests)');
  readonly requestDurationUs = this.counter('nv_inference_request_duration_us', 'Cumulative inference request duration in microseconds (includes cached requests)');
  readonly queueDurationUs = this.counter('nv_inference_queue_duration_us', 'Cumulative inference queuing duration in microseconds (includes cached requests)');
  readonly computeInputDurationUs = this.counter('nv_inference_compute_input_duration_us', 'Cumulative compute input duration in microseconds (does not include cached requests)');
  readonly computeInferDurationUs = this.counter('nv_inference_compute_infer_duration_us', 'Cumulative compute inference duration in microseconds (does not include cached requests)');
  readonly computeOutputDurationUs = this.counter('nv_inference_compute_output_duration_us', 'Cumulative inference compute output duration in microseconds (does not include cached requests)');
  readonly cacheHits = this.counter('nv_cache_num_hits_per_model', 'Number of response cache hits per model');
  readonly cacheHitDurationUs = this.counter('nv_cache_hit_duration_per_model', 'Cumulative time spent looking up response cache hits, microseconds');
  readonly cacheMisses = this.counter('nv_cache_num_misses_per_model', 'Number of response cache misses per model');
  readonly cacheMissDurationUs = this.counter('nv_cache_miss_duration_per_model', 'Cumulative time spent on response cache misses (lookup and insertion), microseconds');
  /** Server-wide gauges of the response cache, read when scraped. */
  observeResponseCache(cache: { readonly entryCount: number; readonly utilization: number; readonly evictionCount: number }): void {
    const gauge = (name: string, help: string, read: () => number) =>
      new Gauge({ name, help, registers: [this.registry], collect() { this.set(read()); } });
    gauge('nv_cache_num_entries', 'Number of responses stored in the response cache', () => cache.entryCount);
    gauge('nv_cache_num_evictions', 'Number of responses evicted from the response cache to make room', () => cache.evictionCount);
    gauge('nv_cache_util', 'Fraction of the response cache size in use', () => cache.utilization);
  }

  readonly pendingRequests = new Gauge({
    name: 'nv_inference_pending_request_count',
    help: 'Instantaneous number of pending requests awaiting execution per-model.',
    labelNames: MODEL_LABELS,
    registers: [this.registry],
  });
  readonly modelLoadDurationSeconds = new Gauge({
    name: 'nv_model_load_duration_secs',
    help: 'Model load time in seconds',
    labelNames: MODEL_LABELS,
    registers: [this.registry],
  });
  readonly cpuMemoryUsedBytes = new Gauge({
    name: 'nv_cpu_memory_used_bytes',
    help: 'CPU memory used by the server process (resident set size), bytes',
    registers: [this.registry],
    collect() {
      this.set(process.memoryUsage.rss());
    },
  });

  readonly requestDurationSeconds = this.histogram('batchwise_inference_request_duration_seconds', 'End-to-end inference request duration inside the server, seconds', LATENCY_BUCKETS_SECONDS);
  readonly queueDurationSeconds = this.histogram('batchwise_inference_queue_duration_seconds', 'Time a request waited in the queue, seconds', LATENCY_BUCKETS_SECONDS);
  readonly computeDurationSeconds = this.histogram('batchwise_inference_compute_duration_seconds', 'Time to run one batch (input + infer + output), seconds', LATENCY_BUCKETS_SECONDS);
  readonly batchSize = this.histogram('batchwise_inference_batch_size', 'Samples per model execution', BATCH_SIZE_BUCKETS);
  readonly modelState = new Gauge({
    name: 'batchwise_model_ready',
    help: '1 when the model version is ready to serve, 0 when it failed to load or is unavailable',
    labelNames: [...MODEL_LABELS, 'execution_provider'],
    registers: [this.registry],
  });

  readonly modelLoadFailures = new Counter({
    name: 'batchwise_model_load_failures_total',
    help: 'Model version loads that failed (the serving version, if any, kept serving)',
    labelNames: MODEL_LABELS,
    registers: [this.registry],
  });

  readonly gpuMemoryUsedBytes = new Gauge({
    name: 'nv_gpu_memory_used_bytes',
    help: 'GPU used memory, in bytes',
    labelNames: ['gpu_uuid'],
    registers: [this.registry],
  });
  readonly gpuUtilization = new Gauge({
    name: 'nv_gpu_utilization',
    help: 'GPU utilization rate [0.0 - 1.0)',
    labelNames: ['gpu_uuid'],
    registers: [this.registry],
  });
  readonly gpuMemoryTotalBytes = new Gauge({
    name: 'nv_gpu_memory_total_bytes',
    help: 'GPU total memory, in bytes',
    labelNames: ['gpu_uuid'],
    registers: [this.registry],
  });
  readonly memoryBudgetBytes = new Gauge({
    name: 'batchwise_memory_budget_bytes',
    help: 'Host memory the server allows itself (--memory-limit); 0 when unlimited',
    registers: [this.registry],
  });
  readonly memoryAccountedBytes = new Gauge({
    name: 'batchwise_memory_accounted_bytes',
    help:
      'Host memory charged to requests in flight, estimated at admission (bodies, batch copies, outputs and replies); ' +
      'admission keeps it under budget minus baseline. Resident memory is nv_cpu_memory_used_bytes, bytes',
    registers: [this.registry],
  });
  readonly memoryBaselineBytes = new Gauge({
    name: 'batchwise_memory_baseline_bytes',
    help: 'Host memory not available to requests: the process at rest (measured after start-up loading) plus the estimated footprints of models loaded, bytes',
    registers: [this.registry],
  });

  readonly gpuOutOfMemory = this.counter('batchwise_gpu_out_of_memory_total', 'Requests failed by a GPU (CUDA) out-of-memory during their batch');
  readonly memoryRejections = new Counter({
    name: 'batchwise_memory_rejections_total',
    help: 'Requests refused because admitting them would exceed the memory budget',
    registers: [this.registry],
  });

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'batchwise_' });
  }

  private counter(name: string, help: string): Counter<'model' | 'version'> {
    return new Counter({ name, help, labelNames: MODEL_LABELS, registers: [this.registry] });
  }

  private histogram(name: string, help: string, buckets: number[]): Histogram<'model' | 'version'> {
    return new Histogram({ name, help, labelNames: MODEL_LABELS, buckets, registers: [this.registry] });
  }
}
