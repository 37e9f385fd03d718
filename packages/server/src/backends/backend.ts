import type { ModelIO } from '../config/model-io.ts';
import type { Tensor } from '../tensor/tensor.ts';

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

/** One model instance: a session that runs one batch at a time. */
export interface ModelInstance {
  execute(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult>;
  close(): Promise<void>;
  /** Set by the owner: called once if the instance gives up after repeated crashes. */
  onFatal: ((error: Error) => void) | undefined;
  /**
   * The JavaScript heap limit of what runs the instance (a worker thread), bytes, where BYTES
   * tensors become one string per element; undefined when not limited.
   */
  readonly heapLimitBytes?: number;
}

export interface InstanceOptions {
  readonly modelName: string;
  readonly modelPath: string;
  /** 'cpu' or 'cuda'; GPU honesty is decided by the backend (see execution-provider.ts). */
  readonly device: 'cpu' | 'cuda';
  readonly deviceId: number;
  /** Opt-in: a KIND_GPU model that cannot get CUDA runs on CPU with a warning instead of failing. */
  readonly allowCpuFallback: boolean;
  readonly sessionOptions: SessionSettings;
}

/** Backend-neutral session settings taken from config.pbtxt (see session-settings.ts). */
export interface SessionSettings {
  readonly intraOpThreads?: number;
  readonly interOpThreads?: number;
  readonly executionMode?: 'sequential' | 'parallel';
  readonly graphOptimizationLevel?: 'disabled' | 'basic' | 'extended' | 'all';
  readonly enableCpuMemArena?: boolean;
  readonly enableMemPattern?: boolean;
  /** CUDA arena limit (Triton's gpu_mem_limit); see docs/operations.md, "GPUs and CUDA", for what onnxruntime-node applies. */
  readonly gpuMemLimitBytes?: number;
}

export interface LoadedInstance {
  readonly instance: ModelInstance;
  readonly io: ModelIO;
  /** The execution provider the session really runs on, e.g. 'CUDAExecutionProvider'. */
  readonly executionProvider: string;
  /** Set when the provider differs from what was asked for (explicit CPU fallback). */
  readonly fallbackReason?: string;
}

export interface Backend {
  readonly name: string;
  createInstance(options: InstanceOptions): Promise<LoadedInstance>;
}
