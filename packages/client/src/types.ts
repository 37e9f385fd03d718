import type {
  DataType,
  ModelMetadata,
  ModelStatistics,
  NumericArray,
  Parameters,
  RepositoryIndexEntry,
  ServerMetadata,
} from '@batchwise/protocol';

/**
 * The shapes the server answers with (datatypes, parameters, metadata, the repository index,
 * statistics) are @batchwise/protocol's, shared with the server.
 */
export type {
  DataType,
  DurationStat,
  InferResponseStatistics,
  ModelMetadata,
  ModelState,
  ModelStatistics,
  ParameterValue,
  Parameters,
  RepositoryIndexEntry,
  ServerMetadata,
  TensorMetadata,
} from '@batchwise/protocol';

export type TypedArray = NumericArray;

/**
 * Input elements, row-major. Numeric types: a typed array (used as is when it is the
 * datatype's own array type), or numbers (bigints too for INT64/UINT64). BOOL: booleans
 * or 0/1. BYTES: strings (UTF-8) or byte arrays. FP16/BF16: a Uint16Array of bit patterns.
 */
export type InputData = TypedArray | readonly (number | bigint)[] | readonly boolean[] | readonly (string | Uint8Array)[];

/**
 * Output elements: the datatype's typed array (BOOL: Uint8Array of 0/1, INT64:
 * BigInt64Array, FP16/BF16: Uint16Array of bit patterns); BYTES: one Uint8Array per element.
 */
export type OutputData = TypedArray | Uint8Array[];

/**
 * A slice of a registered system shared memory region (registerSystemSharedMemory): the
 * tensor's bytes, raw little-endian (BYTES: length-prefixed), at `offset` within the region.
 */
export interface SharedMemoryLocation {
  readonly region: string;
  readonly byteSize: number;
  /** @default 0 */
  readonly offset?: number;
}

interface InferInputBase {
  readonly name: string;
  readonly datatype: DataType;
  readonly shape: readonly number[];
  readonly parameters?: Parameters;
}

/** An input sent in the request, or one the server reads from shared memory (same host only). */
export type InferInput =
  | (InferInputBase & { readonly data: InputData; readonly sharedMemory?: undefined })
  | (InferInputBase & { readonly sharedMemory: SharedMemoryLocation; readonly data?: undefined });

export interface InferRequestedOutput {
  readonly name: string;
  readonly parameters?: Parameters;
  /** Have the server write this output into shared memory; it then comes back with empty `data`. */
  readonly sharedMemory?: SharedMemoryLocation;
}

/** A registered system shared memory region, as the server reports it. */
export interface SharedMemoryRegionStatus {
  readonly name: string;
  readonly key: string;
  readonly offset: number;
  readonly byteSize: number;
}

export interface InferRequest {
  readonly model: string;
  /** Absent: the version the model's version policy picks. */
  readonly version?: string;
  readonly id?: string;
  readonly inputs: readonly InferInput[];
  /** Absent: every output of the model. */
  readonly outputs?: readonly (string | InferRequestedOutput)[];
  /** e.g. `priority`, `timeout` (microseconds). */
  readonly parameters?: Parameters;
  /**
   * HTTP only: send and receive tensors with the binary tensor extension (exact and fast)
   * instead of JSON arrays. FP16/BF16 need it. @default true
   */
  readonly binary?: boolean;
}

/** How HttpClient.infer sends a request. */
export interface HttpInferOptions {
  /**
   * Send a raw binary request, as Triton's binary tensor data extension allows
   * (`Inference-Header-Content-Length: 0`): the body is the bytes of the request's one input, and
   * the server takes its name and shape from the model config (the one variable dimension from
   * the byte size; a batching model gets a batch of 1). A BYTES input must be one element. No id,
   * outputs or parameters travel; every output comes back. @default false
   */
  readonly raw?: boolean;
}

export interface LoadModelOptions {
  readonly config?: string;
  readonly files?: Readonly<Record<string, Uint8Array>>;
}

export interface InferOutput {
  readonly name: string;
  readonly datatype: DataType;
  readonly shape: number[];
  readonly data: OutputData;
}

export interface InferResult {
  readonly modelName: string;
  readonly modelVersion: string;
  readonly id?: string;
  readonly parameters?: Parameters;
  readonly outputs: InferOutput[];
}

/**
 * One answer on an inference stream: a result, or the error of one request. `final` is Triton's
 * `triton_final_response`: the request's last response (always, for a model that is not decoupled). A
 * decoupled model's flag-only final response (sent only to requests that asked for it with the
 * parameter `triton_enable_empty_final_response: true`) is a result with no outputs.
 */
export type StreamResponse =
  | { readonly ok: true; readonly result: InferResult; readonly final: boolean }
  | { readonly ok: false; readonly error: Error; readonly id?: string; readonly final: boolean };

/** What `GrpcClient.streamResponses` and the generate methods take besides the request. */
export interface StreamOptions {
  /** Aborting it cancels the request (the server cancels it too: a queued request leaves its queue). */
  readonly signal?: AbortSignal;
}

/**
 * A request of Triton's generate extension (`generate`, `generate_stream`): keys that name model
 * inputs are tensors (a value or a flat array), `id` its id, `parameters` and any other key parameters.
 */
export type GenerateRequest = Readonly<Record<string, unknown>>;

/** A response of the generate extension: `model_name`, `model_version`, `id` (if the request had one), one key per output. */
export interface GenerateResponse {
  readonly model_name: string;
  readonly model_version: string;
  readonly id?: string;
  readonly [key: string]: unknown;
}

export interface InferStream extends AsyncIterable<StreamResponse> {
  /** Sends one request; its answer comes through iteration, matched by `id`. */
  write(request: InferRequest): void;
  /** No more requests: iteration ends once every answer has arrived. */
  end(): void;
  cancel(): void;
}

/** What the HTTP and the gRPC clients both offer. */
export interface InferenceClient {
  isServerLive(): Promise<boolean>;
  isServerReady(): Promise<boolean>;
  isModelReady(model: string, version?: string): Promise<boolean>;
  serverMetadata(): Promise<ServerMetadata>;
  modelMetadata(model: string, version?: string): Promise<ModelMetadata>;
  /** The model's config (model_config.proto field names). */
  modelConfig(model: string, version?: string): Promise<Record<string, unknown>>;
  infer(request: InferRequest): Promise<InferResult>;
  /** gRPC only; the HTTP client throws. */
  streamInfer(): InferStream;
  /** All models' statistics when `model` is absent. */
  modelStatistics(model?: string, version?: string): Promise<ModelStatistics[]>;
  repositoryIndex(options?: { ready?: boolean }): Promise<RepositoryIndexEntry[]>;
  /**
   * `config`: a model config as JSON that replaces the repository's config.pbtxt. `files`: file
   * overrides by path in the model folder (`1/model.onnx`), Triton's `file:` parameters; with
   * them the model loads from these files and the config alone (the config is then required).
   */
  loadModel(model: string, options?: LoadModelOptions): Promise<void>;
  unloadModel(model: string, options?: { unloadDependents?: boolean }): Promise<void>;
  /**
   * Registers `byteSize` bytes at `offset` of the POSIX shared memory object `key` (e.g.
   * '/my_shm', created with shm_open on the server's host) as region `name`.
   */
  registerSystemSharedMemory(name: string, key: string, byteSize: number, offset?: number): Promise<void>;
  /** One region, or every region when no name is given. */
  unregisterSystemSharedMemory(name?: string): Promise<void>;
  /** One region, or every region when no name is given. */
  systemSharedMemoryStatus(name?: string): Promise<SharedMemoryRegionStatus[]>;
  close(): Promise<void>;
}
