/**
 * The KServe v2 / Triton shapes both sides see as they are on the wire (JSON field names as
 * Triton writes them): parameters, metadata, the repository index and statistics. The server
 * answers with them; the client returns them as it receives them. Types only.
 */
import type { DataType } from './datatype.ts';

export type ParameterValue = string | number | boolean;
export type Parameters = Record<string, ParameterValue>;

export interface TensorMetadata {
  readonly name: string;
  readonly datatype: DataType;
  /** -1 for a variable dimension; with max_batch_size > 0 the first entry is the batch (-1). */
  readonly shape: number[];
}

export interface ServerMetadata {
  readonly name: string;
  readonly version: string;
  readonly extensions: string[];
}

export interface ModelMetadata {
  readonly name: string;
  readonly versions: string[];
  readonly platform: string;
  readonly inputs: TensorMetadata[];
  readonly outputs: TensorMetadata[];
  /** Batchwise extension: where the model really runs, e.g. ['CUDAExecutionProvider']. */
  readonly parameters?: Parameters;
}

export type ModelState = 'UNKNOWN' | 'READY' | 'UNAVAILABLE' | 'LOADING' | 'UNLOADING';

export interface RepositoryIndexEntry {
  readonly name: string;
  readonly version?: string;
  readonly state?: ModelState;
  readonly reason?: string;
}

export interface DurationStat {
  count: number;
  ns: number;
}

/** Triton's statistics extension shape (JSON field names as Triton writes them). */
export interface ModelStatistics {
  name: string;
  version: string;
  last_inference: number;
  inference_count: number;
  execution_count: number;
  inference_stats: {
    success: DurationStat;
    fail: DurationStat;
    queue: DurationStat;
    compute_input: DurationStat;
    compute_infer: DurationStat;
    compute_output: DurationStat;
    cache_hit: DurationStat;
    cache_miss: DurationStat;
  };
  batch_stats: {
    batch_size: number;
    compute_input: DurationStat;
    compute_infer: DurationStat;
    compute_output: DurationStat;
  }[];
  memory_usage: unknown[];
  /**
   * Per-response statistics, keyed by response index. Triton fills them only for backends
   * that report them (decoupled models); ONNX Runtime does not, so this stays {} as there.
   */
  response_stats: Record<string, InferResponseStatistics>;
  /**
   * Batchwise extension, present once a batch of the version went through the rate limiter
   * (--rate-limit=execution_count): count, batches granted; ns, their total wait for resources.
   */
  batchwise_rate_limiter_wait?: DurationStat;
  /** Batchwise extension, present only for a model with `batchwise_latency_objective_ms` (HTTP only: Triton's proto has no place). */
  batchwise_latency_objective?: LatencyObjectiveStatistics;
}

/** What the latency-objective batcher decided last and what it decided it from (docs/batching.md). */
export interface LatencyObjectiveStatistics {
  objective_ms: number;
  /** How long the batcher last chose to wait for more arrivals; 0 when it sent at once. */
  current_wait_ms: number;
  /** The batch size it last aimed at. */
  target_batch_size: number;
  /** Requests per second, from the recent arrival gaps; 0 before two arrivals. */
  arrival_rate_per_second: number;
  /** Requests refused since this load because they would miss the objective: at admission, or later in the queue. */
  shed: { admission: number; queued: number };
  /**
   * Run time per instance: the model's compute t(b) = fixed_ms + per_sample_ms * b and recent means
   * per batch size, plus handoff_ms, what a run costs beyond it (to the instance's thread and back),
   * and reply_ms_per_sample, what answering a batch costs the event loop per sample after its results.
   */
  profile: {
    instance: number;
    fixed_ms: number;
    per_sample_ms: number;
    handoff_ms: number;
    reply_ms_per_sample: number;
    by_batch_size: { batch_size: number; ms: number }[];
  }[];
  /** The event loop's recent lag: how long a request waits before the server reads it (counted twice into its latency). */
  event_loop_lag_ms: number;
  /** Samples admitted at once (queued and running) at most, as feedback from batches ending in time or late has set it. */
  limit_samples: number;
}

export interface InferResponseStatistics {
  compute_infer: DurationStat;
  compute_output: DurationStat;
  success: DurationStat;
  fail: DurationStat;
  empty_response: DurationStat;
  cancel: DurationStat;
}
