import { ConfigFieldError, formatFieldPath, type FieldPath } from './field-error.ts';
import type { ModelConfig } from './model-config.ts';

/** The execution providers a KIND_GPU instance can ask ONNX Runtime for. */
export type GpuProviderName = 'tensorrt' | 'cuda' | 'webgpu';

/** One execution provider of a KIND_GPU instance, with its options under ONNX Runtime's own names and values. */
export interface GpuProvider {
  readonly name: GpuProviderName;
  /**
   * tensorrt and cuda: the keys of ONNX Runtime's provider options (`trt_fp16_enable`,
   * `gpu_mem_limit`, ...), as Triton's onnxruntime backend passes them; webgpu: the option names
   * onnxruntime-node takes (`preferredLayout`, ...).
   */
  readonly options: Readonly<Record<string, string>>;
  /** The config parameter that set each option, by option name: `precision_mode`, `gpu_mem_limit`, `optimization.cuda.graphs`. */
  readonly sources: Readonly<Record<string, string>>;
}

/** How a parameter's text becomes the option's value; `expected` says what it takes. */
interface Parse {
  (value: string): string | undefined;
  readonly expected: string;
}

const rule = (expected: string, read: (value: string) => string | undefined): Parse => Object.assign(read, { expected });
const bool = rule('true or false (1 or 0)', (v) => {
  const word = v.trim().toLowerCase();
  if (['1', 'true', 'on', 'yes'].includes(word)) return '1';
  if (['0', 'false', 'off', 'no'].includes(word)) return '0';
  return undefined;
});
const wholeNumber = (v: string, min: number) =>
  /^\s*-?\d+\s*$/.test(v) && Number.isSafeInteger(Number(v)) && Number(v) >= min ? String(Number(v)) : undefined;
const int = rule('an integer', (v) => wholeNumber(v, Number.MIN_SAFE_INTEGER));
const uint = rule('a non-negative integer', (v) => wholeNumber(v, 0));
const text = rule('a string', (v) => v);
const oneOf = (...values: string[]) => rule(`one of ${values.join(', ')}`, (v) => (values.includes(v.trim()) ? v.trim() : undefined));
const byNumber = (names: readonly string[]) =>
  rule(names.map((n, i) => `${i} (${n})`).join(', '), (v) => (/^\s*\d+\s*$/.test(v) ? names[Number(v)] : undefined));

/**
 * Parameters of Triton's `tensorrt` accelerator (onnxruntime_backend src/onnxruntime.cc): each
 * with the ONNX Runtime TensorRT option it sets. precision_mode is read apart.
 */
const TENSORRT_PARAMETERS: Readonly<Record<string, readonly [option: string, parse: Parse]>> = {
  max_workspace_size_bytes: ['trt_max_workspace_size', uint],
  trt_max_partition_iterations: ['trt_max_partition_iterations', int],
  trt_min_subgraph_size: ['trt_min_subgraph_size', int],
  int8_calibration_table_name: ['trt_int8_calibration_table_name', text],
  int8_use_native_calibration_table: ['trt_int8_use_native_calibration_table', bool],
  trt_dla_enable: ['trt_dla_enable', bool],
  trt_dla_core: ['trt_dla_core', int],
  trt_engine_cache_enable: ['trt_engine_cache_enable', bool],
  trt_engine_cache_path: ['trt_engine_cache_path', text],
  trt_engine_cache_prefix: ['trt_engine_cache_prefix', text],
  trt_dump_subgraphs: ['trt_dump_subgraphs', bool],
  trt_force_sequential_engine_build: ['trt_force_sequential_engine_build', bool],
  trt_context_memory_sharing_enable: ['trt_context_memory_sharing_enable', bool],
  trt_layer_norm_fp32_fallback: ['trt_layer_norm_fp32_fallback', bool],
  trt_timing_cache_enable: ['trt_timing_cache_enable', bool],
  trt_timing_cache_path: ['trt_timing_cache_path', text],
  trt_force_timing_cache: ['trt_force_timing_cache', bool],
  trt_detailed_build_log: ['trt_detailed_build_log', bool],
  trt_build_heuristics_enable: ['trt_build_heuristics_enable', bool],
  trt_sparsity_enable: ['trt_sparsity_enable', bool],
  trt_builder_optimization_level: ['trt_builder_optimization_level', int],
  trt_auxiliary_streams: ['trt_auxiliary_streams', int],
  trt_tactic_sources: ['trt_tactic_sources', text],
  trt_extra_plugin_lib_paths: ['trt_extra_plugin_lib_paths', text],
  trt_profile_min_shapes: ['trt_profile_min_shapes', text],
  trt_profile_max_shapes: ['trt_profile_max_shapes', text],
  trt_profile_opt_shapes: ['trt_profile_opt_shapes', text],
  trt_cuda_graph_enable: ['trt_cuda_graph_enable', bool],
  trt_dump_ep_context_model: ['trt_dump_ep_context_model', bool],
  trt_ep_context_file_path: ['trt_ep_context_file_path', text],
  trt_ep_context_embed_mode: ['trt_ep_context_embed_mode', int],
};

/** Triton's precision_mode, as the TensorRT option it turns on (FP32 is TensorRT's default: none). */
const PRECISION_MODES: Readonly<Record<string, string | undefined>> = {
  FP32: undefined,
  FP16: 'trt_fp16_enable',
  BF16: 'trt_bf16_enable',
  INT8: 'trt_int8_enable',
};

/**
 * Options of ONNX Runtime's CUDA provider a `cuda` accelerator may set (Triton passes its
 * parameters through under these names). The device and stream are the server's to choose.
 */
const CUDA_OPTIONS: Readonly<Record<string, Parse>> = {
  gpu_mem_limit: uint,
  arena_extend_strategy: oneOf('kNextPowerOfTwo', 'kSameAsRequested'),
  cudnn_conv_algo_search: oneOf('EXHAUSTIVE', 'HEURISTIC', 'DEFAULT'),
  do_copy_in_default_stream: bool,
  cudnn_conv_use_max_workspace: bool,
  cudnn_conv1d_pad_to_nc1d: bool,
  enable_cuda_graph: bool,
  enable_skip_layer_norm_strict_mode: bool,
  prefer_nhwc: bool,
  use_ep_level_unified_stream: bool,
  use_tf32: bool,
  tunable_op_enable: bool,
  tunable_op_tuning_enable: bool,
  tunable_op_max_tuning_duration_ms: uint,
};
const SERVER_OWNED_CUDA_OPTIONS = [
  'device_id',
  'has_user_compute_stream',
  'user_compute_stream',
  'gpu_external_alloc',
  'gpu_external_free',
  'gpu_external_empty_cache',
];

/**
 * Triton's older spelling of CUDA options, as model `parameters` (still read by its onnxruntime
 * backend): numbers for the enums.
 */
const CUDA_MODEL_PARAMETERS: Readonly<Record<string, Parse>> = {
  cudnn_conv_algo_search: byNumber(['EXHAUSTIVE', 'HEURISTIC', 'DEFAULT']),
  gpu_mem_limit: uint,
  arena_extend_strategy: byNumber(['kNextPowerOfTwo', 'kSameAsRequested']),
  do_copy_in_default_stream: bool,
};

/** The buffer cache modes of ONNX Runtime's WebGPU provider (storage and uniform buffers). */
const BUFFER_CACHE_MODES = ['disabled', 'lazyRelease', 'simple', 'bucket'];

/**
 * A `webgpu` option whose name starts with this is a session config entry of the provider's, which
 * it reads at session creation, not an option onnxruntime-node's binding passes (it refuses those
 * it does not know): session-options.ts puts it among the session's config entries.
 */
export const WEBGPU_CONFIG_ENTRY_PREFIX = 'ep.webgpuexecutionprovider.';

/**
 * Parameters of our `webgpu` accelerator (not Triton's: onnxruntime-node's WebGPU provider), with
 * the onnxruntime-node option each sets.
 */
const WEBGPU_PARAMETERS: Readonly<Record<string, readonly [option: string, parse: Parse]>> = {
  preferred_layout: ['preferredLayout', oneOf('NCHW', 'NHWC')],
  validation_mode: ['validationMode', oneOf('disabled', 'wgpuOnly', 'basic', 'full')],
  enable_robustness: ['enableRobustness', bool],
  force_cpu_node_names: ['forceCpuNodeNames', text],
  storage_buffer_cache_mode: ['storageBufferCacheMode', oneOf(...BUFFER_CACHE_MODES)],
  uniform_buffer_cache_mode: ['uniformBufferCacheMode', oneOf(...BUFFER_CACHE_MODES)],
  // Not an option of the binding's: a session config entry of the provider's (WEBGPU_CONFIG_ENTRY_PREFIX).
  max_num_pending_dispatches: [
    `${WEBGPU_CONFIG_ENTRY_PREFIX}maxNumPendingDispatches`,
    rule('an integer from 1 to 4096', (v) => (wholeNumber(v, 1) !== undefined && Number(v) <= 4096 ? String(Number(v)) : undefined)),
  ],
};

const ACCELERATORS = ['tensorrt', 'cuda', 'webgpu'] as const;
const LIST: FieldPath = ['optimization', 'execution_accelerators', 'gpu_execution_accelerator'];

/**
 * The execution providers a KIND_GPU instance of this model asks ONNX Runtime for, in order, as
 * Triton's onnxruntime backend reads its config: a `tensorrt` accelerator before CUDA, CUDA
 * always (its options from a `cuda` accelerator, the model's older `parameters` and
 * `optimization { cuda { graphs } }`), or our `webgpu` alone. Throws ConfigFieldError naming the
 * field of an unknown accelerator or a bad value.
 */
export function gpuProvidersOf(config: ModelConfig): GpuProvider[] {
  const accelerators = config.optimization?.execution_accelerators;
  (accelerators?.cpu_execution_accelerator ?? []).forEach((a, i) => {
    throw new ConfigFieldError(
      ['optimization', 'execution_accelerators', 'cpu_execution_accelerator', i, 'name'],
      `unknown CPU execution accelerator '${a.name}': ONNX Runtime for Node.js has none (Triton's is openvino); remove it`,
    );
  });
  const listed = new Map<GpuProviderName, { index: number; parameters: Record<string, string> }>();
  (accelerators?.gpu_execution_accelerator ?? []).forEach((a, index) => {
    const name = a.name as GpuProviderName;
    if (!ACCELERATORS.includes(name)) {
      throw new ConfigFieldError(
        [...LIST, index, 'name'],
        `unknown GPU execution accelerator '${a.name}'; expected one of ${ACCELERATORS.join(', ')}`,
      );
    }
    const first = listed.get(name);
    if (first) throw new ConfigFieldError([...LIST, index, 'name'], `accelerator '${name}' is listed twice (first as #${first.index})`);
    listed.set(name, { index, parameters: a.parameters ?? {} });
  });
  const webgpu = listed.get('webgpu');
  if (webgpu) {
    const other = [...listed.keys()].find((n) => n !== 'webgpu');
    if (other) {
      throw new ConfigFieldError(
        [...LIST, listed.get(other)!.index, 'name'],
        `accelerator '${other}' cannot be listed with 'webgpu': a webgpu instance runs on WebGPU alone, without CUDA`,
      );
    }
    if (config.optimization?.cuda?.graphs === true) {
      throw new ConfigFieldError(
        ['optimization', 'cuda', 'graphs'],
        "CUDA graphs are for the CUDA provider; a model on the 'webgpu' accelerator has none",
      );
    }
    return [webgpuProvider(webgpu.index, webgpu.parameters)];
  }
  const tensorrt = listed.get('tensorrt');
  return [...(tensorrt ? [tensorrtProvider(tensorrt.index, tensorrt.parameters)] : []), cudaProvider(config, listed.get('cuda'))];
}

function tensorrtProvider(index: number, parameters: Record<string, string>): GpuProvider {
  const out = providerBuilder('tensorrt');
  for (const [key, value] of Object.entries(parameters)) {
    const path = [...LIST, index, 'parameters', key];
    if (key === 'precision_mode') {
      if (!Object.hasOwn(PRECISION_MODES, value)) {
        throw new ConfigFieldError(
          path,
          `unsupported precision mode '${value}'; expected one of ${Object.keys(PRECISION_MODES).join(', ')}`,
        );
      }
      const option = PRECISION_MODES[value];
      if (option) out.set(option, '1', path);
      continue;
    }
    const known = ownEntry(TENSORRT_PARAMETERS, key);
    if (!known) {
      throw new ConfigFieldError(
        path,
        `unknown parameter '${key}' for the TensorRT accelerator; expected precision_mode or one of ${Object.keys(TENSORRT_PARAMETERS).join(', ')}`,
      );
    }
    out.set(known[0], parsed(known[1], value, path), path);
  }
  return out.provider;
}

function cudaProvider(config: ModelConfig, accelerator: { index: number; parameters: Record<string, string> } | undefined): GpuProvider {
  const out = providerBuilder('cuda');
  for (const [key, value] of Object.entries(config.parameters ?? {})) {
    const parse = ownEntry(CUDA_MODEL_PARAMETERS, key);
    if (!parse) continue;
    const path = ['parameters', key];
    out.set(key, parsed(parse, value.string_value, path), path);
  }
  // The accelerator's own parameters are the newer spelling: they win over the model's.
  for (const [key, value] of Object.entries(accelerator?.parameters ?? {})) {
    const path = [...LIST, accelerator!.index, 'parameters', key];
    if (SERVER_OWNED_CUDA_OPTIONS.includes(key)) {
      throw new ConfigFieldError(path, `'${key}' is set by the server (instance_group gpus chooses the device)`);
    }
    const parse = ownEntry(CUDA_OPTIONS, key);
    if (!parse) {
      throw new ConfigFieldError(
        path,
        `unknown parameter '${key}' for the CUDA accelerator; expected one of ${Object.keys(CUDA_OPTIONS).join(', ')}`,
      );
    }
    out.set(key, parsed(parse, value, path), path);
  }
  if (config.optimization?.cuda?.graphs === true) out.set('enable_cuda_graph', '1', ['optimization', 'cuda', 'graphs']);
  return out.provider;
}

function webgpuProvider(index: number, parameters: Record<string, string>): GpuProvider {
  const out = providerBuilder('webgpu');
  for (const [key, value] of Object.entries(parameters)) {
    const path = [...LIST, index, 'parameters', key];
    const known = ownEntry(WEBGPU_PARAMETERS, key);
    if (!known) {
      throw new ConfigFieldError(
        path,
        `unknown parameter '${key}' for the WebGPU accelerator; expected one of ${Object.keys(WEBGPU_PARAMETERS).join(', ')}`,
      );
    }
    out.set(known[0], parsed(known[1], value, path), path);
  }
  return out.provider;
}

// Keys come from config.pbtxt: 'valueOf' or 'constructor' must read as unknown, not as Object.prototype's.
function ownEntry<T>(table: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

function parsed(parse: Parse, value: string, path: FieldPath): string {
  const result = parse(value);
  if (result === undefined) throw new ConfigFieldError(path, `must be ${parse.expected}, got '${value}'`);
  return result;
}

function providerBuilder(name: GpuProviderName) {
  const options: Record<string, string> = {};
  const sources: Record<string, string> = {};
  return {
    provider: { name, options, sources } as GpuProvider,
    set(option: string, value: string, path: FieldPath) {
      options[option] = value;
      sources[option] = path.at(-2) === 'parameters' ? String(path.at(-1)) : formatFieldPath(path);
    },
  };
}
