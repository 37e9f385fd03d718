/**
 * The wire-level shapes of the KServe v2 / Triton protocol as the server holds them, shared by
 * every layer: a decoded request and its response, metadata, statistics, repository index
 * entries and shared memory references. Types only; nothing here imports a layer above.
 */
import type { InferenceServerError } from '../errors/errors.ts';
import type { Parameters, Tensor } from '../tensor/tensor.ts';

/** A registered region as the status endpoints report it (Triton's field names). */
export interface SharedMemoryRegionStatus {
  readonly name: string;
  readonly key: string;
  readonly offset: number;
  readonly byte_size: number;
}

/** Where a request's tensor lives: `byteSize` bytes at `offset` within a registered region. */
export interface SharedMemoryRef {
  readonly region: string;
  readonly byteSize: number;
  readonly offset: number;
}

/** One inference request, decoded from either protocol; tensors are views on the wire buffer. */
export interface InferenceRequest {
  readonly id?: string;
  readonly modelName: string;
  /** Empty or absent: the version chosen by the model's version policy (the highest ready). */
  readonly modelVersion?: string;
  readonly inputs: RequestInput[];
  /**
   * A raw binary request's body (HTTP `Inference-Header-Content-Length: 0`): the bytes of the
   * model's only input, its name, datatype and shape deduced from the config (raw-input.ts);
   * `inputs` is then empty.
   */
  readonly rawInput?: Uint8Array;
  /** Absent or empty: every output of the model. */
  readonly outputs?: RequestedOutput[];
  /** Request-level parameters, e.g. `priority`, `timeout` (microseconds), `binary_data_output`. */
  readonly parameters: Parameters;
  /**
   * The `sequence_id` parameter as the frontend read it exactly: a uint64 (HTTP JSON beyond 2^53, gRPC
   * int64_param read as uint64) or a string. Absent: core reads `parameters.sequence_id`.
   */
  readonly sequenceId?: bigint | string;
  /** The caller's canary stickiness key (HTTP header / gRPC metadata `batchwise-canary-key`), if it sent one. */
  readonly canaryKey?: string;
  /** Set only by the server itself, on an ensemble step of a traced request: the trace its own trace belongs to. */
  readonly parentTraceId?: number;
  /**
   * W3C trace context: the caller's `traceparent`/`tracestate` (HTTP headers, gRPC metadata), or on
   * an ensemble step its ensemble request's span. Used only in trace mode opentelemetry.
   */
  readonly traceContext?: TraceContext;
}

/**
 * A request's place in a sequence (Triton's sequence extension): its correlation id and flags.
 * The id is a uint64 (0n: none) or a string ('': none), and ids of the two kinds never match.
 */
export interface RequestSequence {
  readonly id: bigint | string;
  readonly start: boolean;
  readonly end: boolean;
}

/** W3C Trace Context header values, passed as the strings they are on the wire. */
export interface TraceContext {
  readonly traceparent: string;
  readonly tracestate?: string;
}

/** An input tensor; with `sharedMemory` its bytes are still in a registered region and `data` is empty until core reads them. */
export interface RequestInput extends Tensor {
  readonly sharedMemory?: SharedMemoryRef;
}

export interface RequestedOutput {
  readonly name: string;
  readonly parameters: Parameters;
  /** Write this output into a registered region instead of sending it back. */
  readonly sharedMemory?: SharedMemoryRef;
}

/** An output tensor; with `sharedMemory` it was written into that region and frontends send no data for it. */
export interface ResponseOutput extends Tensor {
  readonly sharedMemory?: SharedMemoryRef;
}

export interface InferenceResponse {
  readonly modelName: string;
  readonly modelVersion: string;
  readonly id?: string;
  readonly outputs: ResponseOutput[];
  readonly parameters?: Parameters;
  /** The W3C `traceparent` of this request's span when it was traced in mode opentelemetry: frontends send it back. */
  readonly traceparent?: string;
}

/**
 * An inference the server runs for itself: an ensemble's step, or a JavaScript model calling
 * another model (BLS). It takes the same path as a client's request (validation, the model's
 * own scheduler and batching, statistics), so the caller gets outputs or the same typed errors.
 */
export type InferenceCall = (request: InferenceRequest, options?: { readonly signal?: AbortSignal }) => Promise<InferenceResponse>;

/**
 * One event of a request's response stream (InferenceService.inferStream): a response, an error
 * response (the request goes on unless it is final), or the final flag alone (a decoupled model that
 * ends a request without a last response: Triton's empty final response).
 */
export type StreamEvent =
  | { readonly kind: 'response'; readonly response: InferenceResponse; readonly final: boolean }
  | { readonly kind: 'error'; readonly error: InferenceServerError; readonly final: boolean }
  | { readonly kind: 'final' };

/**
 * An InferenceCall whose responses come as a stream, as the model sends them (a decoupled ensemble
 * step). Iterating throws the request's refusal; a later failure is a final error event. The next
 * event is taken only once the caller is done with the last one: a slow caller holds the model back.
 */
export type InferenceStreamCall = (request: InferenceRequest, options?: { readonly signal?: AbortSignal }) => AsyncIterable<StreamEvent>;

/** Metadata, the repository index and statistics are shapes the client shares: @batchwise/protocol. */
export type {
  DurationStat,
  InferResponseStatistics,
  LatencyObjectiveStatistics,
  ModelMetadata,
  ModelState,
  ModelStatistics,
  RepositoryIndexEntry,
  ServerMetadata,
  TensorMetadata,
} from '@batchwise/protocol';
