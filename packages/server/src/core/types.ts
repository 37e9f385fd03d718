import type { ModelConfig } from '../config/model-config.ts';
import type { ObjectiveRefusal } from '../scheduler/scheduler.ts';
import type { InferenceStream } from './response-stream.ts';
import type { TraceSettings, TraceSettingsUpdate } from '../trace/trace-settings.ts';
import type { LogSettings } from '../logging/log-settings.ts';
import type { MemoryReservation } from '../memory/memory-guard.ts';
import type { SentAsJson } from '../memory/request-charge.ts';
import type { LoadParameters } from '../models/load-parameters.ts';
import type { UnloadOptions } from '../models/model-control.ts';
import type {
  InferenceRequest,
  InferenceResponse,
  ModelMetadata,
  ModelStatistics,
  RepositoryIndexEntry,
  ServerMetadata,
  SharedMemoryRegionStatus,
} from '../protocol/types.ts';

/** The model a body is for, and whether its replies will likely be JSON (a JSON body's default). */
export interface BodyTarget {
  readonly modelName: string;
  readonly modelVersion?: string;
  readonly repliesAsJson: boolean;
}

/**
 * What a frontend counted of a request's tensor elements before decoding them, from the wire
 * (InferenceService.admitElements). Counts may err high, never low.
 */
export interface ElementCensus {
  /** Elements of the request, or of those inputs decoding turns into arrays or values of their own. */
  readonly elements: number;
  /** Of them, BYTES elements (JSON: strings in arrays) and their content bytes. */
  readonly stringElements: number;
  readonly stringBytes: number;
  /** Elements of each input, where known before decoding (checked against what the model takes). */
  readonly inputs: readonly { readonly name: string; readonly elements: number }[];
  /** What decoding will allocate and create (typed arrays, BYTES layouts, parsed values), bytes. */
  readonly decodeBytes: number;
}

/** How a frontend holds and sends one request, for the memory guard's charge. */
export interface InferOptions {
  /**
   * What the frontend reserved for the request as received (reserveRequestMemory); infer adds
   * the rest of the request's charge to it, and the frontend releases it once the reply is
   * sent. Without one, infer charges the request's input bytes as received (a gRPC message is
   * read whole before its handler runs) and releases everything when it returns.
   */
  readonly memory?: MemoryReservation;
  /** Outputs the frontend will write as JSON text, which costs more than their bytes; default: none. */
  readonly sentAsJson?: SentAsJson;
  /**
   * process.hrtime.bigint() when the frontend saw the request (its headers, before its body was
   * read), so that queue timeouts and the latency objective count reading and decoding it.
   * @default when infer() is called
   */
  readonly arrivalNs?: bigint;
  /**
   * Aborted when the request's client goes away (its connection, stream or call closed): a queued
   * request leaves its queue at once, a running JavaScript request sees it, and the request fails with
   * CANCELLED, counted as Triton's failure reason CANCELED.
   */
  readonly signal?: AbortSignal;
}

/**
 * What both frontends (http/, grpc/) call. One instance is shared by both, so validation,
 * scheduling and statistics follow one path whatever the protocol.
 *
 * A `modelVersion` that is undefined or the empty string (what the wire carries when a client
 * names no version) means the version policy's choice, the highest ready version: frontends
 * pass the client's value as it came.
 */
export interface InferenceService {
  isLive(): boolean;
  isReady(): boolean;
  serverMetadata(): ServerMetadata;
  /** false for unknown models as well as for known models without a ready version. */
  isModelReady(modelName: string, modelVersion?: string): boolean;
  /** Throws InferenceServerError (unknown model, unknown version). */
  modelMetadata(modelName: string, modelVersion?: string): ModelMetadata;
  modelConfig(modelName: string, modelVersion?: string): ModelConfig;
  /**
   * --load-on-demand: whether the repositories have the model and it does not serve, so that a
   * request for it (infer, metadata, config) loads it and waits; always false without the flag.
   */
  awaitsLoad(modelName: string): boolean;
  /**
   * --load-on-demand: resolves once the model serves, loading it if it awaits a load (requests for
   * one model share one load), at once otherwise; throws its load error, or UNAVAILABLE when it has
   * not loaded within `timeoutMs` (@default --load-on-demand-timeout-secs). infer() does it itself.
   */
  awaitLoad(modelName: string, timeoutMs?: number): Promise<void>;
  /** One response; a decoupled model is refused (UNSUPPORTED): its responses are a stream (inferStream). */
  infer(request: InferenceRequest, options?: InferOptions): Promise<InferenceResponse>;
  /**
   * The request's responses as a stream (response-stream.ts): a decoupled model's as it sends them
   * (zero, one or many, then its final flag), any other model's one response, final. Frontends that
   * stream (gRPC ModelStreamInfer, HTTP generate and generate_stream) use it.
   */
  inferStream(request: InferenceRequest, options?: InferOptions): InferenceStream;
  /** Whether the model's serving version is decoupled; false for a model that is unknown or not ready (infer then says why). */
  isDecoupled(modelName: string, modelVersion?: string): boolean;
  /**
   * Before a request's body is read: the refusal (UNAVAILABLE) its model's latency objective would
   * give a request of one sample that arrived at `arrivalNs`, counted as the objective's, and when
   * to answer it (its deadline); undefined when it would be admitted as far as its headers tell, or
   * when the model cannot take requests (infer() then gives the error). So a refusal under overload
   * costs no body read or decode.
   */
  shedOnArrival(
    target: { readonly modelName: string; readonly modelVersion?: string; readonly canaryKey?: string },
    arrivalNs: bigint,
  ): ObjectiveRefusal | undefined;
  /**
   * Charges a request body of this many bytes to the memory budget before it is read, with an
   * advance on the rest of the request's charge estimated from the model's config, or throws
   * the over-budget error (RESOURCE_EXHAUSTED). Pass the reservation to infer() and release it when the
   * request ends, whatever its outcome.
   */
  reserveRequestMemory(bodyBytes: number, target?: BodyTarget): MemoryReservation;
  /**
   * Before a frontend decodes a request's elements into arrays or values of their own: refuses
   * (INVALID_ARG, naming the count and the limit) more elements than --max-request-elements allows
   * or the model takes, or BYTES elements a model instance could not hold as strings; then charges
   * `census.decodeBytes` to `memory`, or throws the over-budget error (RESOURCE_EXHAUSTED).
   */
  admitElements(
    memory: MemoryReservation,
    target: { readonly modelName: string; readonly modelVersion?: string },
    census: ElementCensus,
  ): void;
  /** Every loaded version's statistics when no model is given (undefined or empty), else the model's or one version's. */
  statistics(modelName?: string, modelVersion?: string): ModelStatistics[];
  repositoryIndex(readyOnly: boolean): RepositoryIndexEntry[];
  /** Repository extension: `config` and `file:<path>` parameters (load-parameters.ts). */
  loadModel(modelName: string, parameters?: LoadParameters): Promise<void>;
  /** Repository extension: `unloadDependents` is accepted on any model (model-control.ts says what it does). */
  unloadModel(modelName: string, options?: UnloadOptions): Promise<void>;
  /** System shared memory extension: `key` names a POSIX shared memory object the client created. */
  registerSystemSharedMemory(name: string, key: string, offset: number, byteSize: number): Promise<void>;
  /** One region, or all of them when no name is given. */
  unregisterSystemSharedMemory(name?: string): Promise<void>;
  /** One region (NOT_FOUND when unknown), or all of them when no name is given. */
  systemSharedMemoryStatus(name?: string): SharedMemoryRegionStatus[];
  /**
   * CUDA shared memory extension: no CUDA region is ever registered, so the list is empty and a named region
   * NOT_FOUND; unregistering succeeds with nothing to do, and registering is refused (Errors.cudaSharedMemoryUnsupported).
   */
  cudaSharedMemoryStatus(name?: string): never[];
  /** Triton's logging extension: the server's log settings. */
  logSettings(): LogSettings;
  /** Changes any of the log settings (INVALID_ARG naming a bad one); returns them all. */
  updateLogSettings(update: Readonly<Record<string, unknown>>): LogSettings;
  /** The trace settings in force for a model, or the global ones when no model is given (undefined or empty). */
  traceSettings(modelName?: string): TraceSettings;
  /** Changes the global trace settings, or a model's own (cleared ones follow the global settings). */
  updateTraceSettings(update: TraceSettingsUpdate, modelName?: string): TraceSettings;
}
