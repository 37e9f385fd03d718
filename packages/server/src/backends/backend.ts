import type { GpuProvider } from '../config/execution-accelerators.ts';
import type { ModelConfig } from '../config/model-config.ts';
import type { ModelIO } from '../config/model-io.ts';
import type { InferenceCall, InferenceStreamCall, TraceContext } from '../protocol/types.ts';
import type { Parameters, Tensor } from '../tensor/tensor.ts';

/** Nanosecond timings of one execution, split as Triton's statistics split them. */
export interface ExecutionTimings {
  readonly computeInputNs: number;
  readonly computeInferNs: number;
  readonly computeOutputNs: number;
}

export interface ExecutionResult {
  /** One tensor per requested output name, batched along the first dimension. */
  readonly outputs: Tensor[];
  readonly timings: ExecutionTimings;
}

/** One request of a batch, for instances that take each request's own inputs (executeRequests). */
export interface InstanceRequest {
  readonly id?: string;
  /** One tensor per model input, this request's own rows (batch dimension first when max_batch_size > 0). */
  readonly inputs: readonly Tensor[];
  /** The outputs this request asked for (every config output when it asked for none). */
  readonly outputNames: readonly string[];
  readonly parameters: Parameters;
  /** When the request is traced: what a call to another model made while running it joins (its span as parent). */
  readonly caller?: { readonly parentTraceId: number; readonly traceContext?: TraceContext };
  /** Aborted when the request is cancelled: model code sees it (and its calls to other models are cancelled). */
  readonly signal?: AbortSignal;
  /** A decoupled model's request: where its responses go, each as the model sends it. */
  readonly responses?: ResponseSink;
}

/** A response of a decoupled request: its outputs (named as asked), or an error for the request. */
export type StreamedResponse = { readonly outputs: Tensor[] } | { readonly error: Error };

/** Where a decoupled request's responses go (core/response-stream.ts holds them until they are sent). */
export interface ResponseSink {
  /**
   * One response, and `final` with the last one; `send(undefined, true)` is the final flag alone.
   * Resolves once the response is taken for sending (the model may then send more: backpressure).
   * Throws, at once, when it cannot be held (the memory budget): the request ends with that error.
   */
  send(response: StreamedResponse | undefined, final: boolean): Promise<void>;
}

/**
 * How a decoupled request ended: with its final flag, sent by the model (`sentError` when its last
 * response was an error), or with `error`, an end the model did not send (its timeout, a crash, its
 * cancellation), which the caller answers.
 */
export type StreamEnd = { readonly error?: undefined; readonly sentError?: Error } | { readonly error: Error };

/**
 * One request's outcome: its outputs (named as asked), or an error for that request alone, or for a
 * decoupled request (its responses went to its sink) when it ends, which may be after the batch returned.
 */
export type RequestOutcome = { readonly outputs: Tensor[] } | { readonly error: Error } | { readonly ended: Promise<StreamEnd> };

export interface RequestsResult {
  /** One per request, in order. */
  readonly responses: RequestOutcome[];
  readonly timings: ExecutionTimings;
}

/** One model instance: a session that runs one batch at a time. */
export interface ModelInstance {
  /** Runs one assembled batch (every request's rows in one tensor per input); warmup calls it too. */
  execute(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult>;
  /**
   * Runs a batch as its requests, each with its own inputs, and answers each on its own (the
   * JavaScript backend: model code sees the requests Triton's Python backend would). Where an
   * instance has it, the scheduler calls it instead of `execute`. Rejects only when the whole
   * batch failed (a crash, a timeout).
   */
  executeRequests?(requests: readonly InstanceRequest[]): Promise<RequestsResult>;
  /**
   * Runs one assembled batch in place and returns when it is done (an instance on the event loop,
   * event-loop-instance.ts). Where an instance has it, the scheduler calls it instead of `execute`:
   * a batch then costs no promise and no loop iteration between its dispatch and its answers (issue 44).
   */
  readonly executeNow?: (inputs: readonly Tensor[], outputNames: readonly string[]) => ExecutionResult;
  close(): Promise<void>;
  /** Set by the owner: called once if the instance gives up after repeated crashes. */
  onFatal: ((error: Error) => void) | undefined;
  /**
   * The JavaScript heap limit of what runs the instance (a worker thread), bytes, where BYTES
   * tensors become one string per element; undefined when not limited.
   */
  readonly heapLimitBytes?: number;
}

/** Where an instance runs: KIND_CPU on the CPU, KIND_GPU on the GPU providers of its settings (`gpuProviders`). */
export type InstanceDevice = 'cpu' | 'gpu';

export interface InstanceOptions {
  readonly modelName: string;
  readonly modelPath: string;
  /** GPU honesty is the backend's: a 'gpu' instance runs on its GPU providers or fails to load, saying why. */
  readonly device: InstanceDevice;
  /** The GPU, numbered as CUDA numbers the GPUs this process sees (backends/gpu-detect.ts); 0 on the CPU. */
  readonly deviceId: number;
  /** Opt-in: a KIND_GPU model whose GPU providers cannot be created runs on CPU with a warning instead of failing. */
  readonly allowCpuFallback: boolean;
  readonly sessionOptions: SessionSettings;
  /** What a backend running user code needs to know of its model (the JavaScript backend); others ignore it. */
  readonly model?: InstanceModelContext;
  /** Runs an inference through the server's request path (calls from model code to other models). */
  readonly callModel?: InferenceCall;
  /** The same as a stream of responses (calls from model code that read a decoupled model's responses). */
  readonly streamModel?: InferenceStreamCall;
}

export interface InstanceModelContext {
  /** The complete, normalized config. */
  readonly config: ModelConfig;
  readonly version: string;
  /** The model folder (holds config.pbtxt). */
  readonly modelDir: string;
  /** The version folder. */
  readonly versionDir: string;
  /** The instance group's name. */
  readonly instanceName: string;
  readonly kind: 'KIND_CPU' | 'KIND_GPU';
}

/** Backend-neutral session settings taken from config.pbtxt (see session-settings.ts). */
export interface SessionSettings {
  readonly intraOpThreads?: number;
  readonly interOpThreads?: number;
  readonly executionMode?: 'sequential' | 'parallel';
  readonly graphOptimizationLevel?: 'disabled' | 'basic' | 'extended' | 'all';
  readonly enableCpuMemArena?: boolean;
  readonly enableMemPattern?: boolean;
  /**
   * The execution providers of a KIND_GPU instance, in order (config/execution-accelerators.ts);
   * DEFAULT_GPU_PROVIDERS when absent. What onnxruntime-node passes on of their options:
   * docs/operations.md, "GPUs and CUDA".
   */
  readonly gpuProviders?: readonly GpuProvider[];
  /**
   * ONNX Runtime session config entries (onnxruntime_session_options_config_keys.h), from the
   * parameters whose key starts with `session.`, as Triton's onnxruntime backend passes
   * `session.use_device_allocator_for_initializers`: e.g. `session.intra_op.allow_spinning`.
   */
  readonly sessionConfigEntries?: Readonly<Record<string, string>>;
}

/** A KIND_GPU instance of a model that names no accelerator: ONNX Runtime's CUDA provider, as in Triton. */
export const DEFAULT_GPU_PROVIDERS: readonly GpuProvider[] = [{ name: 'cuda', options: {}, sources: {} }];

export interface LoadedInstance {
  readonly instance: ModelInstance;
  readonly io: ModelIO;
  /** The execution provider the session really runs on, e.g. 'CUDAExecutionProvider'. */
  readonly executionProvider: string;
  /** Set when the provider differs from what was asked for (explicit CPU fallback). */
  readonly fallbackReason?: string;
  /**
   * Set when the instance runs in a process of its own (a Python model's stub): the host memory that
   * process held once its model was initialized (its resident set), bytes, which the memory guard
   * counts instead of a worker thread's estimate.
   */
  readonly processBytes?: number;
  /**
   * Set when the instance runs in a process of its own on a GPU (a KIND_GPU Python model): the GPU
   * memory that process held once its model was initialized, bytes, as nvidia-smi reports it; held
   * against --model-gpu-memory-limit on the instance's device.
   */
  readonly gpuProcessBytes?: number;
  /** Set when the instance runs on the event loop: how long a full batch took when timed at load, microseconds. */
  readonly eventLoopRunUs?: number;
}

export interface Backend {
  readonly name: string;
  /** Its model files are code the server runs (the JavaScript backend): a load request may bring them only with the operator's opt-in. */
  readonly runsModelCode?: boolean;
  /**
   * Its models' tensors are the config's own, never read from a model file (js, python): a config must
   * declare them all, after completeConfig when the backend has one.
   */
  readonly configDeclaresTensors?: boolean;
  /**
   * Completes a config from the model's own code before any instance starts (Triton's Python
   * `auto_complete_config`); undefined when the model has nothing to add. Not called with
   * --strict-model-config=true.
   */
  completeConfig?(config: ModelConfig, modelFile: string, context: InstanceModelContext): Promise<Record<string, unknown> | undefined>;
  createInstance(options: InstanceOptions): Promise<LoadedInstance>;
  /** Settings the config asks for that this backend cannot apply, by config parameter, in words (for the model's metadata). */
  unappliedSettings?(settings: SessionSettings): Record<string, string>;
}
