import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { CollectedHistogram, type HistogramData } from './collected-histogram.ts';
import { FAILURE_REASONS, OBJECTIVE_SHED_REASONS, VersionSeries, wholeMicroseconds, type SequenceFigures } from './version-series.ts';
import type { LatencyObjectiveStatistics } from '../protocol/types.ts';

const MODEL_LABELS = ['model', 'version'] as const;

/** Latency buckets in seconds, 100 µs .. 30 s: fine enough for p99 across replicas. */
const LATENCY_BUCKETS_SECONDS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256];
/** Model load times in seconds, 10 ms .. 2 min: a small model opens in tens of ms, a large one downloads for minutes. */
const LOAD_BUCKETS_SECONDS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/** What the many-models gauges read when scraped (models/model-manager.ts, repository/cache-space.ts). */
export interface ModelResidencyReading {
  readonly modelsLoaded: number;
  readonly hostBytes: number;
  readonly hostLimitBytes: number | undefined;
  readonly gpuBytes: ReadonlyMap<number, number>;
  readonly gpuLimitBytes: number | undefined;
  readonly cacheBytes: number;
  readonly cacheLimitBytes: number | undefined;
  readonly cacheDeletions: number;
}

/**
 * Every metric the server exports, declared once. Names and labels of the nv_* family are
 * Triton's, so existing dashboards work; the batchwise_* histograms are what Triton lacks.
 *
 * Per-version metrics are read when scraped from each version's VersionSeries (plain
 * numbers the request path adds to, see versionSeries), not updated through prom-client on
 * every request. Triton's counters and the pending gauge of a version exist from its first
 * load, at 0; the cache and GPU out-of-memory counters from their first count, and the
 * histograms from their first observation, as prom-client would show them.
 */
export class ServerMetrics {
  readonly registry = new Registry();
  /** By model and version, in the order they were first loaded. */
  private readonly versions = new Map<string, VersionSeries>();

  readonly requestSuccess = this.versionCounter(
    'nv_inference_request_success',
    'Number of successful inference requests, all batch sizes',
    (s) => s.success,
  );
  readonly requestFailure = this.failureCounter();
  readonly inferenceCount = this.versionCounter(
    'nv_inference_count',
    'Number of inferences performed (does not include cached requests)',
    (s) => s.inferences,
  );
  readonly executionCount = this.versionCounter(
    'nv_inference_exec_count',
    'Number of model executions performed (does not include cached requests)',
    (s) => s.executions,
  );
  readonly requestDurationUs = this.versionCounter(
    'nv_inference_request_duration_us',
    'Cumulative inference request duration in microseconds (includes cached requests)',
    (s) => wholeMicroseconds(s.requestNs),
  );
  readonly queueDurationUs = this.versionCounter(
    'nv_inference_queue_duration_us',
    'Cumulative inference queuing duration in microseconds (includes cached requests)',
    (s) => wholeMicroseconds(s.queueNs),
  );
  readonly computeInputDurationUs = this.versionCounter(
    'nv_inference_compute_input_duration_us',
    'Cumulative compute input duration in microseconds (does not include cached requests)',
    (s) => wholeMicroseconds(s.computeInputNs),
  );
  readonly computeInferDurationUs = this.versionCounter(
    'nv_inference_compute_infer_duration_us',
    'Cumulative compute inference duration in microseconds (does not include cached requests)',
    (s) => wholeMicroseconds(s.computeInferNs),
  );
  readonly computeOutputDurationUs = this.versionCounter(
    'nv_inference_compute_output_duration_us',
    'Cumulative inference compute output duration in microseconds (does not include cached requests)',
    (s) => wholeMicroseconds(s.computeOutputNs),
  );
  readonly cacheHits = this.versionCounter(
    'nv_cache_num_hits_per_model',
    'Number of response cache hits per model',
    (s) => s.cacheHits,
    'first-count',
  );
  readonly cacheHitDurationUs = this.versionCounter(
    'nv_cache_hit_duration_per_model',
    'Cumulative time spent looking up response cache hits, microseconds',
    (s) => wholeMicroseconds(s.cacheHitNs),
    'first-count',
  );
  readonly cacheMisses = this.versionCounter(
    'nv_cache_num_misses_per_model',
    'Number of response cache misses per model',
    (s) => s.cacheMisses,
    'first-count',
  );
  readonly cacheMissDurationUs = this.versionCounter(
    'nv_cache_miss_duration_per_model',
    'Cumulative time spent on response cache misses (lookup and insertion), microseconds',
    (s) => wholeMicroseconds(s.cacheMissNs),
    'first-count',
  );
  /** Server-wide gauges of the response cache, read when scraped. */
  observeResponseCache(cache: { readonly entryCount: number; readonly utilization: number; readonly evictionCount: number }): void {
    const gauge = (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(read());
        },
      });
    gauge('nv_cache_num_entries', 'Number of responses stored in the response cache', () => cache.entryCount);
    gauge('nv_cache_num_evictions', 'Number of responses evicted from the response cache to make room', () => cache.evictionCount);
    gauge('nv_cache_util', 'Fraction of the response cache size in use', () => cache.utilization);
  }

  readonly pendingRequests = this.pendingGauge();
  readonly modelLoadDurationSeconds = new Gauge({
    name: 'nv_model_load_duration_secs',
    help: 'Model load time in seconds',
    labelNames: MODEL_LABELS,
    registers: [this.registry],
  });
  // Triton's CPU metrics, set by metrics/cpu-monitor.ts, which registers them where /proc can be read.
  // The server process's own resident memory is batchwise_process_resident_memory_bytes.
  readonly cpuUtilization = new Gauge({ name: 'nv_cpu_utilization', help: 'CPU utilization rate [0.0 - 1.0]', registers: [] });
  readonly cpuMemoryTotalBytes = new Gauge({ name: 'nv_cpu_memory_total_bytes', help: 'CPU total memory (RAM), in bytes', registers: [] });
  readonly cpuMemoryUsedBytes = new Gauge({ name: 'nv_cpu_memory_used_bytes', help: 'CPU used memory (RAM), in bytes', registers: [] });
  exportCpuMetrics(): void {
    if (this.registry.getSingleMetric('nv_cpu_utilization')) return;
    for (const gauge of [this.cpuUtilization, this.cpuMemoryTotalBytes, this.cpuMemoryUsedBytes]) this.registry.registerMetric(gauge);
  }

  readonly requestDurationSeconds = this.versionHistogram(
    'batchwise_inference_request_duration_seconds',
    'End-to-end inference request duration inside the server, seconds',
    (s) => s.requestSeconds,
  );
  readonly queueDurationSeconds = this.versionHistogram(
    'batchwise_inference_queue_duration_seconds',
    'Time a request waited in the queue, seconds',
    (s) => s.queueSeconds,
  );
  readonly computeDurationSeconds = this.versionHistogram(
    'batchwise_inference_compute_duration_seconds',
    'Time to run one batch (input + infer + output), seconds',
    (s) => s.computeSeconds,
  );
  readonly batchSize = this.versionHistogram('batchwise_inference_batch_size', 'Samples per model execution', (s) => s.batchSize);
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

  readonly modelLoadFailed = new Gauge({
    name: 'batchwise_model_load_failed',
    help:
      '1 while a model the server should serve has a failed load on record (a version that did not load, instances ' +
      'that crashed repeatedly, a config or download that failed), even if an older version still serves; 0 once ' +
      'a load succeeds or the model is unloaded',
    labelNames: ['model'],
    registers: [this.registry],
  });

  // Many models per host (issue 27: --load-on-demand, --model-memory-limit, --model-cache-disk-limit).
  readonly modelLoads = new Counter({
    name: 'batchwise_model_loads_total',
    help: 'Model versions loaded: at start-up, by repository polls, by load requests and, with --load-on-demand, by the requests that needed them',
    registers: [this.registry],
  });
  readonly modelEvictions = new Counter({
    name: 'batchwise_model_evictions_total',
    help: 'Models unloaded to make room for another under --model-memory-limit (or --model-gpu-memory-limit): the least recently used with nothing queued, running or waiting',
    registers: [this.registry],
  });
  readonly modelLoadDurationByPhase = this.zeroed(
    new Histogram({
      name: 'batchwise_model_load_duration_seconds',
      help: "Time a model load took, by phase: download (its repository's files into the local cache; about 0 from a local folder), room (each version's wait for evictions to make room under --model-memory-limit) and session (opening and warming up each version's instances), seconds",
      labelNames: ['phase'],
      buckets: LOAD_BUCKETS_SECONDS,
      registers: [this.registry],
    }),
    [{ phase: 'download' }, { phase: 'room' }, { phase: 'session' }],
  );
  readonly loadWaitSeconds = new Histogram({
    name: 'batchwise_model_load_wait_seconds',
    help: 'How long requests waited for their model to load (--load-on-demand), one observation per request that waited, seconds',
    buckets: LOAD_BUCKETS_SECONDS,
    registers: [this.registry],
  });
  /** Where batchwise_memory_accounted_bytes reads its value when scraped (the memory guard). */
  observeMemoryAccounted(read: () => number): void {
    this.readAccounted = read;
  }
  private residency: () => ModelResidencyReading | undefined = () => undefined;
  /** Where the many-models gauges read their values when scraped. */
  observeResidency(read: () => ModelResidencyReading): void {
    this.residency = read;
  }
  readonly modelsLoaded = this.residencyGauge('batchwise_models_loaded', 'Models with a version serving', (r) => r.modelsLoaded);
  readonly modelMemoryBytes = this.residencyGauge(
    'batchwise_model_memory_bytes',
    "Host memory the loaded model versions take by the memory guard's estimate (weights once per CPU instance), loads under way and versions draining included: what --model-memory-limit bounds, bytes",
    (r) => r.hostBytes,
  );
  readonly modelMemoryLimitBytes = this.residencyGauge(
    'batchwise_model_memory_limit_bytes',
    '--model-memory-limit, bytes; 0 when there is none',
    (r) => r.hostLimitBytes ?? 0,
  );
  readonly modelGpuMemoryBytes = new Gauge({
    name: 'batchwise_model_gpu_memory_bytes',
    help: 'Memory the loaded model versions take on each GPU (weights once per instance on it): what --model-gpu-memory-limit bounds, bytes',
    labelNames: ['gpu'],
    registers: [this.registry],
    collect: () => {
      this.modelGpuMemoryBytes.reset();
      for (const [gpu, bytes] of this.residency()?.gpuBytes ?? []) this.modelGpuMemoryBytes.set({ gpu: String(gpu) }, bytes);
    },
  });
  readonly modelGpuMemoryLimitBytes = this.residencyGauge(
    'batchwise_model_gpu_memory_limit_bytes',
    '--model-gpu-memory-limit (each GPU), bytes; 0 when there is none',
    (r) => r.gpuLimitBytes ?? 0,
  );
  readonly modelCacheBytes = this.residencyGauge(
    'batchwise_model_cache_bytes',
    'Bytes of the model versions complete in the local cache of the s3:// repositories (with --load-on-demand or --model-cache-disk-limit)',
    (r) => r.cacheBytes,
  );
  readonly modelCacheLimitBytes = this.residencyGauge(
    'batchwise_model_cache_limit_bytes',
    '--model-cache-disk-limit, bytes; 0 when there is none',
    (r) => r.cacheLimitBytes ?? 0,
  );
  readonly modelCacheDeletions = new Counter({
    name: 'batchwise_model_cache_deletions_total',
    help: 'Model versions deleted from the local cache of the s3:// repositories to stay within --model-cache-disk-limit (least recently used first)',
    registers: [this.registry],
    collect: () => {
      this.modelCacheDeletions.reset();
      this.modelCacheDeletions.inc(this.residency()?.cacheDeletions ?? 0);
    },
  });

  // Canary releases (models/canary-control.ts).
  readonly canaryWeight = new Gauge({
    name: 'batchwise_canary_weight',
    help: 'Percent of the requests naming no version that each version of a model with a canary declaration gets (the split in force: 0 for a rolled-back canary)',
    labelNames: ['model', 'version'],
    registers: [this.registry],
  });
  readonly canaryRollbacks = new Counter({
    name: 'batchwise_canary_rollbacks_total',
    help: 'Canary versions this server stopped sending unversioned requests to, because they were worse than the stable version (reason: error_rate, latency)',
    labelNames: ['model', 'reason'],
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
  readonly gpuPowerUsage = new Gauge({
    name: 'nv_gpu_power_usage',
    help: 'GPU power usage in watts',
    labelNames: ['gpu_uuid'],
    registers: [this.registry],
  });
  readonly gpuPowerLimit = new Gauge({
    name: 'nv_gpu_power_limit',
    help: 'GPU power management limit in watts',
    labelNames: ['gpu_uuid'],
    registers: [this.registry],
  });
  readonly memoryBudgetBytes = new Gauge({
    name: 'batchwise_memory_budget_bytes',
    help: 'Host memory the server allows itself (--memory-limit); 0 when unlimited',
    registers: [this.registry],
  });
  /** Read when scraped from what observeMemoryAccounted gave: each request charges and releases several times. */
  private readAccounted: (() => number) | undefined;
  readonly memoryAccountedBytes = (() => {
    const metrics = this;
    return new Gauge({
      name: 'batchwise_memory_accounted_bytes',
      help:
        'Host memory charged to requests in flight, estimated at admission (bodies, batch copies, outputs and replies); ' +
        'admission keeps it under budget minus baseline. Resident memory is batchwise_process_resident_memory_bytes, bytes',
      registers: [this.registry],
      collect() {
        if (metrics.readAccounted) this.set(metrics.readAccounted());
      },
    });
  })();
  readonly memoryBaselineBytes = new Gauge({
    name: 'batchwise_memory_baseline_bytes',
    help: 'Host memory not available to requests: the process at rest (measured after start-up loading) plus the estimated footprints of models loaded, bytes',
    registers: [this.registry],
  });

  readonly rateLimiterWaitDurationUs = this.versionCounter(
    'batchwise_rate_limiter_wait_duration_us',
    'Cumulative time batches waited for rate limiter resources (--rate-limit=execution_count), microseconds',
    (s) => wholeMicroseconds(s.rateLimiterWaitNs),
    'first-count',
  );
  readonly rateLimiterWaitSeconds = this.versionHistogram(
    'batchwise_rate_limiter_wait_seconds',
    "Time a batch waited for its instance's rate limiter resources, seconds",
    (s) => s.rateLimiterWaitSeconds,
  );
  readonly gpuOutOfMemory = this.versionCounter(
    'batchwise_gpu_out_of_memory_total',
    'Requests failed by a GPU (CUDA) out-of-memory during their batch',
    (s) => s.gpuOutOfMemory,
    'first-count',
  );
  // Security (access/model-control-exposure.ts): read by `batchwise doctor`.
  readonly modelControlExposed = new Gauge({
    name: 'batchwise_model_control_exposed',
    help:
      '1 while the model-control API (load and unload, --model-control-mode explicit) answers without a key on a ' +
      'non-loopback address, per frontend (protocol) and listening address; 0 where it needs a key, listens on loopback or is off',
    labelNames: ['protocol', 'address'],
    registers: [this.registry],
  });
  readonly memoryRejections = new Counter({
    name: 'batchwise_memory_rejections_total',
    help: 'Requests refused because admitting them would exceed the memory budget',
    registers: [this.registry],
  });

  // The latency objective (batchwise_latency_objective_ms): for versions that declare one, read when scraped.
  readonly latencyObjectiveSeconds = this.objectiveGauge(
    'batchwise_latency_objective_seconds',
    "The model's latency objective, seconds",
    (o) => o.objective_ms / 1e3,
  );
  readonly latencyObjectiveWaitSeconds = this.objectiveGauge(
    'batchwise_latency_objective_wait_seconds',
    'How long the batcher last chose to wait for more arrivals (0: it sent at once), seconds',
    (o) => o.current_wait_ms / 1e3,
  );
  readonly latencyObjectiveTargetBatchSize = this.objectiveGauge(
    'batchwise_latency_objective_target_batch_size',
    'The batch size the batcher last aimed at under the latency objective',
    (o) => o.target_batch_size,
  );
  readonly latencyObjectiveArrivalRate = this.objectiveGauge(
    'batchwise_latency_objective_arrival_rate',
    'Requests per second, as the batcher estimates them from recent arrival gaps',
    (o) => o.arrival_rate_per_second,
  );
  readonly latencyObjectiveProfile = this.objectiveProfileGauge();
  readonly latencyObjectiveShed = this.objectiveShedCounter();

  // The sequence batcher (sequence_batching): for versions that have one, read when scraped.
  readonly sequencesActive = this.sequenceGauge(
    'batchwise_sequence_active',
    'Sequences the sequence batcher holds: in a slot or waiting in the backlog',
    (f) => f.active,
  );
  readonly sequenceBacklog = this.sequenceGauge(
    'batchwise_sequence_backlog',
    'Sequences waiting in the backlog because every slot is taken',
    (f) => f.backlog,
  );
  readonly sequenceSlotsInUse = this.sequenceGauge(
    'batchwise_sequence_slots_in_use',
    'Sequence slots held by a sequence',
    (f) => f.slotsInUse,
  );
  readonly sequenceSlots = this.sequenceGauge(
    'batchwise_sequence_slots',
    'Sequence slots of the version: max_batch_size (direct) or max_candidate_sequences (oldest) per instance',
    (f) => f.slots,
  );
  readonly sequenceStateBytes = this.sequenceGauge(
    'batchwise_sequence_state_bytes',
    "Bytes the sequences' implicit states hold, charged to the memory budget",
    (f) => f.stateBytes,
  );
  readonly sequenceIdleReleases = this.sequenceIdleReleaseCounter();

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'batchwise_' });
  }

  /** A histogram with samples (at 0) for each of these label sets from the start, so dashboards never read an absent series. */
  private zeroed<T extends string>(histogram: Histogram<T>, labelSets: readonly Partial<Record<T, string>>[]): Histogram<T> {
    for (const labels of labelSets) histogram.zero(labels);
    return histogram;
  }

  /** A gauge of the many-models figures, read when scraped (0 until the server has them). */
  private residencyGauge(name: string, help: string, read: (r: ModelResidencyReading) => number): Gauge {
    const reading = () => this.residency();
    return new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        const r = reading();
        this.set(r === undefined ? 0 : read(r));
      },
    });
  }

  /**
   * The series of a model version, created at its first load and kept for the life of the
   * server (Prometheus counters never go back), shared by later loads of the same version.
   */
  versionSeries(model: string, version: string): VersionSeries {
    const key = `${model}\u0000${version}`;
    let series = this.versions.get(key);
    if (!series) {
      series = new VersionSeries(model, version, { latencySeconds: LATENCY_BUCKETS_SECONDS, batchSize: BATCH_SIZE_BUCKETS });
      this.versions.set(key, series);
    }
    return series;
  }

  /** A counter per version, read from its series when scraped; 'first-count' ones appear once they count. */
  private versionCounter(
    name: string,
    help: string,
    read: (series: VersionSeries) => number,
    from: 'load' | 'first-count' = 'load',
  ): Counter<'model' | 'version'> {
    const versions = this.versions;
    return new Counter({
      name,
      help,
      labelNames: MODEL_LABELS,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const series of versions.values()) {
          const value = read(series);
          if (from === 'load' || value > 0) this.inc(series.labels, value);
        }
      },
    });
  }

  private failureCounter(): Counter<'model' | 'version' | 'reason'> {
    return this.reasonCounter(
      'nv_inference_request_failure',
      'Number of failed inference requests, all batch sizes',
      FAILURE_REASONS,
      (s) => s.failures,
    );
  }

  /** A counter per version and reason; versions for which `read` gives nothing are left out. */
  private reasonCounter<R extends string>(
    name: string,
    help: string,
    reasons: readonly R[],
    read: (series: VersionSeries) => Record<R, number> | undefined,
  ): Counter<'model' | 'version' | 'reason'> {
    const versions = this.versions;
    return new Counter({
      name,
      help,
      labelNames: [...MODEL_LABELS, 'reason'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const series of versions.values()) {
          const counts = read(series);
          // Triton's labels come sorted by name (prometheus-cpp keeps them in a std::map): model, reason, version.
          if (counts)
            for (const reason of reasons) this.inc({ model: series.labels.model, reason, version: series.labels.version }, counts[reason]);
        }
      },
    });
  }

  private pendingGauge(): Gauge<'model' | 'version'> {
    return this.seriesGauge(
      'nv_inference_pending_request_count',
      'Instantaneous number of pending requests awaiting execution per-model.',
      (s) => s.pending,
    );
  }

  /** A gauge per version, read from its series when scraped; versions for which `read` gives undefined are left out. */
  private seriesGauge(name: string, help: string, read: (series: VersionSeries) => number | undefined): Gauge<'model' | 'version'> {
    const versions = this.versions;
    return new Gauge({
      name,
      help,
      labelNames: MODEL_LABELS,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const series of versions.values()) {
          const value = read(series);
          if (value !== undefined) this.set(series.labels, value);
        }
      },
    });
  }

  private objectiveGauge(name: string, help: string, read: (o: LatencyObjectiveStatistics) => number): Gauge<'model' | 'version'> {
    return this.seriesGauge(name, help, (s) => (s.latencyObjective ? read(s.latencyObjective()) : undefined));
  }

  private sequenceGauge(name: string, help: string, read: (f: SequenceFigures) => number): Gauge<'model' | 'version'> {
    return this.seriesGauge(name, help, (s) => (s.sequences ? read(s.sequences()) : undefined));
  }

  private sequenceIdleReleaseCounter(): Counter<'model' | 'version'> {
    const versions = this.versions;
    return new Counter({
      name: 'batchwise_sequence_idle_releases_total',
      help: 'Sequences whose slot was freed because no request came for max_sequence_idle_microseconds',
      labelNames: MODEL_LABELS,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const series of versions.values()) {
          if (series.sequences || series.idleReleasesBefore > 0) {
            this.inc(series.labels, series.idleReleasesBefore + (series.sequences?.().idleReleases ?? 0));
          }
        }
      },
    });
  }

  /** The fitted run time t(b) = fixed + per_sample * b of each instance, as two series by `term`. */
  private objectiveProfileGauge(): Gauge<'model' | 'version' | 'instance' | 'term'> {
    const versions = this.versions;
    return new Gauge({
      name: 'batchwise_latency_objective_profile_seconds',
      help: 'Fitted run time per instance, t(b) = fixed + per_sample * b + handoff: term="fixed", term="per_sample" (the model\'s compute) and term="handoff" (to the instance\'s thread and back), seconds',
      labelNames: [...MODEL_LABELS, 'instance', 'term'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const series of versions.values()) {
          for (const p of series.latencyObjective?.().profile ?? []) {
            const labels = { ...series.labels, instance: String(p.instance) };
            this.set({ ...labels, term: 'fixed' }, p.fixed_ms / 1e3);
            this.set({ ...labels, term: 'per_sample' }, p.per_sample_ms / 1e3);
            this.set({ ...labels, term: 'handoff' }, p.handoff_ms / 1e3);
          }
        }
      },
    });
  }

  /** From a version's first load with an objective (or its first refusal), at 0 for each reason. */
  private objectiveShedCounter(): Counter<'model' | 'version' | 'reason'> {
    return this.reasonCounter(
      'batchwise_latency_objective_shed_total',
      'Requests refused (503) because they would miss the latency objective, by reason: on arrival (admission) or while queued (queued)',
      OBJECTIVE_SHED_REASONS,
      (s) => (s.latencyObjective || s.objectiveShed.admission + s.objectiveShed.queued > 0 ? s.objectiveShed : undefined),
    );
  }

  private versionHistogram(name: string, help: string, read: (series: VersionSeries) => HistogramData): CollectedHistogram {
    const versions = this.versions;
    return new CollectedHistogram(
      name,
      help,
      () => Array.from(versions.values(), (s) => ({ labels: s.labels, data: read(s) })),
      this.registry,
    );
  }
}
