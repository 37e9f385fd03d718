/**
 * ModelConfig as config.pbtxt and the config endpoint carry it. Field names are those of
 * model_config.proto (snake_case, as Triton's JSON config uses them); int64 fields are
 * JavaScript numbers, as Triton prints them in JSON. Only the fields the server reads are
 * typed here; every other field of model_config.proto is kept as parsed and printed back.
 */
export interface ModelConfig {
  name: string;
  platform?: string;
  backend?: string;
  runtime?: string;
  version_policy?: ModelVersionPolicy;
  max_batch_size: number;
  input: ModelInput[];
  output: ModelOutput[];
  instance_group?: ModelInstanceGroup[];
  default_model_filename?: string;
  dynamic_batching?: ModelDynamicBatching;
  sequence_batching?: ModelSequenceBatching;
  optimization?: ModelOptimizationPolicy;
  parameters?: Record<string, { string_value: string }>;
  model_warmup?: ModelWarmup[];
  response_cache?: { enable?: boolean };
  [field: string]: unknown;
}

export interface ModelVersionPolicy {
  latest?: { num_versions?: number };
  all?: Record<string, never>;
  specific?: { versions?: number[] };
}

export interface ModelTensorReshape {
  shape: number[];
}

export interface ModelInput {
  name: string;
  data_type: string; // 'TYPE_FP32', ...
  format?: string;
  dims: number[];
  reshape?: ModelTensorReshape;
  is_shape_tensor?: boolean;
  allow_ragged_batch?: boolean;
  optional?: boolean;
  [field: string]: unknown;
}

export interface ModelOutput {
  name: string;
  data_type: string;
  dims: number[];
  reshape?: ModelTensorReshape;
  label_filename?: string;
  is_shape_tensor?: boolean;
  [field: string]: unknown;
}

export interface ModelInstanceGroup {
  name?: string;
  kind?: 'KIND_AUTO' | 'KIND_GPU' | 'KIND_CPU' | 'KIND_MODEL';
  count?: number;
  gpus?: number[];
  rate_limiter?: ModelRateLimiter;
  [field: string]: unknown;
}

/** Triton's ModelRateLimiter: what each instance of the group needs to execute, and its weight. */
export interface ModelRateLimiter {
  resources?: { name?: string; global?: boolean; count?: number }[];
  priority?: number;
}

export interface ModelQueuePolicy {
  timeout_action?: 'REJECT' | 'DELAY';
  default_timeout_microseconds?: number;
  allow_timeout_override?: boolean;
  max_queue_size?: number;
}

export interface ModelDynamicBatching {
  preferred_batch_size?: number[];
  max_queue_delay_microseconds?: number;
  preserve_ordering?: boolean;
  priority_levels?: number;
  default_priority_level?: number;
  default_queue_policy?: ModelQueuePolicy;
  priority_queue_policy?: Record<string, ModelQueuePolicy>;
  [field: string]: unknown;
}

/** Triton's ModelSequenceBatching (the sequence batcher of stateful models; config/sequence-batching.ts reads it). */
export interface ModelSequenceBatching {
  max_sequence_idle_microseconds?: number;
  control_input?: ModelSequenceControlInput[];
  state?: ModelSequenceState[];
  direct?: { max_queue_delay_microseconds?: number; minimum_slot_utilization?: number };
  oldest?: {
    max_candidate_sequences?: number;
    preferred_batch_size?: number[];
    max_queue_delay_microseconds?: number;
    preserve_ordering?: boolean;
  };
  iterative_sequence?: boolean;
  [field: string]: unknown;
}

export interface ModelSequenceControlInput {
  name?: string;
  control?: ModelSequenceControl[];
}

export interface ModelSequenceControl {
  /** Absent: CONTROL_SEQUENCE_START, the enum's zero. */
  kind?: 'CONTROL_SEQUENCE_START' | 'CONTROL_SEQUENCE_READY' | 'CONTROL_SEQUENCE_END' | 'CONTROL_SEQUENCE_CORRID';
  int32_false_true?: number[];
  fp32_false_true?: number[];
  bool_false_true?: boolean[];
  data_type?: string;
}

export interface ModelSequenceState {
  input_name?: string;
  output_name?: string;
  data_type?: string;
  dims?: number[];
  initial_state?: ModelSequenceInitialState[];
  use_same_buffer_for_input_output?: boolean;
  use_growable_memory?: boolean;
}

export interface ModelSequenceInitialState {
  data_type?: string;
  dims?: number[];
  zero_data?: boolean;
  data_file?: string;
  name?: string;
}

export interface ModelOptimizationPolicy {
  graph?: { level?: number };
  priority?: string;
  /** Triton's CUDA settings; `graphs` turns on the CUDA provider's CUDA graphs (config/execution-accelerators.ts). */
  cuda?: { graphs?: boolean; [field: string]: unknown };
  execution_accelerators?: {
    gpu_execution_accelerator?: { name: string; parameters?: Record<string, string> }[];
    cpu_execution_accelerator?: { name: string; parameters?: Record<string, string> }[];
  };
  [field: string]: unknown;
}

export interface ModelWarmupInput {
  data_type: string;
  dims: number[];
  zero_data?: boolean;
  random_data?: boolean;
  input_data_file?: string;
}

export interface ModelWarmup {
  name: string;
  batch_size?: number;
  inputs?: Record<string, ModelWarmupInput>;
  count?: number;
}
