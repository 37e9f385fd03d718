import type { ModelInstance, ResponseSink } from '../backends/backend.ts';
import type { InferenceServerError } from '../errors/errors.ts';
import type { ModelConfig } from '../config/model-config.ts';
import type { VersionStatistics } from '../metrics/version-statistics.ts';
import type { Parameters, Tensor } from '../tensor/tensor.ts';
import type { RequestSequence } from '../protocol/types.ts';
import type { MemoryReservation } from '../memory/memory-guard.ts';
import type { RequestTrace } from '../trace/tracer.ts';
import type { ExecutionGate } from './rate-limiter.ts';

/** A request admitted to a model's queue: inputs already validated against the config. */
export interface QueuedRequest {
  /** One tensor per model input, in config order; batch dimension first when max_batch_size > 0. */
  readonly inputs: readonly Tensor[];
  /** Samples in this request (its first dimension); 1 for models without batching. */
  readonly batchSize: number;
  /** Priority level; 0 means the model's default. */
  readonly priority: number;
  /** Queue timeout in microseconds; 0 means the model's default policy. */
  readonly timeoutMicroseconds: number;
  /** process.hrtime.bigint() when the request arrived at the server. */
  readonly arrivalNs: bigint;
  /** Present when the request is traced: the scheduler marks its compute timestamps. */
  readonly trace?: RequestTrace;
  /** JavaScript heap its BYTES inputs take in an instance as strings (element-cost.ts stringHeapBytes). @default 0 */
  readonly stringHeapBytes?: number;
  /**
   * For instances that run each request on its own (ModelInstance.executeRequests): the request's
   * id, the outputs it asked for (@default every config output) and its parameters.
   */
  readonly id?: string;
  readonly outputNames?: readonly string[];
  readonly parameters?: Parameters;
  /** Its sequence, for a model with sequence_batching (core reads it from the request's parameters). */
  readonly sequence?: RequestSequence;
  /** An ensemble's request: the `sequence_id` as exactly as its frontend read it, which each step passes on. */
  readonly sequenceId?: bigint | string;
  /**
   * Aborted when the request's client goes away: a queued request leaves its queue at once (counted
   * CANCELED), a running one is told (JavaScript models see it), and its outcome is the cancellation.
   */
  readonly signal?: AbortSignal;
  /**
   * A decoupled model's request: its responses go here as the model sends them, and enqueue resolves
   * (with no tensors) once the model ended it with its final flag.
   */
  readonly responses?: ResponseSink;
}

/** Queues requests of one model version and runs them on that version's instances. */
export interface Scheduler {
  /**
   * Resolves with one tensor per config output (this request's rows only); for instances that run
   * each request on its own, with the request's `outputNames` only; for a decoupled model's request
   * (`responses`), with none once its final response went.
   */
  enqueue(request: QueuedRequest): Promise<Tensor[]>;
  /**
   * The refusal the latency objective would give a request of `samples` samples that arrived at
   * `arrivalNs`, asked before its body is read (issue 30: a refusal must cost less than serving),
   * counted as the objective's; undefined where nothing would be shed early.
   */
  shedOnArrival?(samples: number, arrivalNs: bigint): ObjectiveRefusal | undefined;
  /** Requests queued or executing. */
  readonly pendingCount: number;
  /** Resolves once nothing is queued or executing. */
  drain(): Promise<void>;
  /**
   * The server stops or the version retires: requests that start something new (a sequence's START)
   * are refused from now on, while those of work in flight (a sequence already started) are admitted.
   */
  stop?(): void;
  /** The version is unloaded (after drain): gives back what it holds of server-wide resources (the rate limiter). */
  close?(): void;
}

/**
 * A request the latency objective refuses, and when the refusal is answered: at the request's
 * deadline (its arrival + the objective), not at once. Clients that resend a refused request at
 * once (a closed loop) would otherwise resend it thousands of times a second, and those refusals
 * take the cores the admitted work needs (issue 30); every request is still answered within the
 * objective, with its result or with the refusal.
 */
export interface ObjectiveRefusal {
  readonly error: InferenceServerError;
  /** process.hrtime.bigint() at which to answer. */
  readonly answerAtNs: bigint;
}

export interface SchedulerContext {
  readonly config: ModelConfig;
  readonly instances: readonly ModelInstance[];
  readonly outputNames: readonly string[];
  readonly stats: VersionStatistics;
  /** A batch grows only while its requests' stringHeapBytes fit in this. @default Infinity */
  readonly maxBatchStringHeapBytes?: number;
  /** With --rate-limit=execution_count: an instance starts a batch only once it holds its resources. */
  readonly gate?: ExecutionGate;
  /** The version's model_warmup runs, in the order they ran: the latency objective's first run times. */
  readonly warmupRuns?: readonly WarmupRun[];
  /** Charges what a sequence's implicit state holds to the memory guard (throws when over budget). @default not charged */
  readonly reserveMemory?: (bytes: number) => MemoryReservation;
  /** The bytes of each initial_state's data_file, by state input name, read at load. */
  readonly initialStateFiles?: ReadonlyMap<string, Uint8Array>;
}

/** One model_warmup execution: which instance, how many samples, how long (dispatch to completion, and of it in the model). */
export interface WarmupRun {
  readonly instance: number;
  readonly batchSize: number;
  readonly ns: number;
  /** The instance's own timings of the run (ExecutionTimings summed). @default ns */
  readonly computeNs?: number;
}
