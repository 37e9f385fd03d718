import { describe, expect, it } from 'vitest';
import { gpuProvidersOf } from './execution-accelerators.ts';
import { parseModelConfig } from './index.ts';

/** `line:col` of the nth (from 0) `needle` in `text`, 1-based, as config errors give it. */
function at(text: string, needle: string, nth = 0): string {
  let offset = text.indexOf(needle);
  for (let i = 0; i < nth && offset >= 0; i++) offset = text.indexOf(needle, offset + 1);
  if (offset < 0) throw new Error(`'${needle}' is not in the text`);
  const before = text.slice(0, offset).split('\n');
  return `${before.length}:${before.at(-1)!.length + 1}`;
}

const errorOf = (text: string): string => {
  try {
    parseModelConfig(text);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('expected the config to be refused');
};

const accelerators = (list: string, rest = '') => `name: "m"
max_batch_size: 8
optimization { execution_accelerators {
  gpu_execution_accelerator: [ ${list} ]
} }
${rest}`;

describe('GPU execution accelerators, as Triton’s onnxruntime backend reads them', () => {
  it('puts TensorRT before CUDA, with its parameters under ONNX Runtime’s option names', () => {
    const config = parseModelConfig(
      accelerators(`{
    name: "tensorrt"
    parameters { key: "precision_mode" value: "FP16" }
    parameters { key: "max_workspace_size_bytes" value: "1073741824" }
    parameters { key: "trt_engine_cache_enable" value: "true" }
    parameters { key: "trt_engine_cache_path" value: "/tmp/trt" }
    parameters { key: "trt_builder_optimization_level" value: "3" }
  }`),
    );
    expect(gpuProvidersOf(config)).toEqual([
      {
        name: 'tensorrt',
        options: {
          trt_fp16_enable: '1',
          trt_max_workspace_size: '1073741824',
          trt_engine_cache_enable: '1',
          trt_engine_cache_path: '/tmp/trt',
          trt_builder_optimization_level: '3',
        },
        sources: {
          trt_fp16_enable: 'precision_mode',
          trt_max_workspace_size: 'max_workspace_size_bytes',
          trt_engine_cache_enable: 'trt_engine_cache_enable',
          trt_engine_cache_path: 'trt_engine_cache_path',
          trt_builder_optimization_level: 'trt_builder_optimization_level',
        },
      },
      { name: 'cuda', options: {}, sources: {} },
    ]);
    // FP32 is TensorRT's default precision: nothing to turn on.
    expect(
      gpuProvidersOf(parseModelConfig(accelerators('{ name: "tensorrt" parameters { key: "precision_mode" value: "FP32" } }')))[0]!.options,
    ).toEqual({});
  });

  it('gives CUDA the options of the cuda accelerator, the model’s older parameters and optimization.cuda.graphs', () => {
    const config = parseModelConfig(`name: "m"
optimization {
  cuda { graphs: true }
  execution_accelerators { gpu_execution_accelerator: [ {
    name: "cuda"
    parameters { key: "gpu_mem_limit" value: "4294967296" }
    parameters { key: "use_tf32" value: "0" }
  } ] }
}
parameters { key: "cudnn_conv_algo_search" value: { string_value: "1" } }
parameters { key: "arena_extend_strategy" value: { string_value: "1" } }
parameters { key: "gpu_mem_limit" value: { string_value: "1024" } }
parameters { key: "do_copy_in_default_stream" value: { string_value: "false" } }`);
    expect(gpuProvidersOf(config)).toEqual([
      {
        name: 'cuda',
        options: {
          cudnn_conv_algo_search: 'HEURISTIC',
          arena_extend_strategy: 'kSameAsRequested',
          // The accelerator's parameter is the newer spelling: it wins over the model's.
          gpu_mem_limit: '4294967296',
          do_copy_in_default_stream: '0',
          use_tf32: '0',
          enable_cuda_graph: '1',
        },
        sources: {
          cudnn_conv_algo_search: 'cudnn_conv_algo_search',
          arena_extend_strategy: 'arena_extend_strategy',
          gpu_mem_limit: 'gpu_mem_limit',
          do_copy_in_default_stream: 'do_copy_in_default_stream',
          use_tf32: 'use_tf32',
          enable_cuda_graph: 'optimization.cuda.graphs',
        },
      },
    ]);
  });

  it('runs a webgpu instance on WebGPU alone (our addition), with its parameters as onnxruntime-node names them', () => {
    const config = parseModelConfig(
      accelerators(`{ name: "webgpu"
    parameters { key: "preferred_layout" value: "NHWC" }
    parameters { key: "validation_mode" value: "basic" }
    parameters { key: "enable_robustness" value: "1" }
    parameters { key: "force_cpu_node_names" value: "Softmax_0,TopK_1" } }`),
    );
    expect(gpuProvidersOf(config)).toEqual([
      {
        name: 'webgpu',
        options: { preferredLayout: 'NHWC', validationMode: 'basic', enableRobustness: '1', forceCpuNodeNames: 'Softmax_0,TopK_1' },
        sources: {
          preferredLayout: 'preferred_layout',
          validationMode: 'validation_mode',
          enableRobustness: 'enable_robustness',
          forceCpuNodeNames: 'force_cpu_node_names',
        },
      },
    ]);
  });

  it("takes WebGPU's buffer cache modes and its pending dispatches (1 to 4096), refusing other values by name", () => {
    const config = parseModelConfig(
      accelerators(`{ name: "webgpu"
    parameters { key: "storage_buffer_cache_mode" value: "simple" }
    parameters { key: "uniform_buffer_cache_mode" value: "lazyRelease" }
    parameters { key: "max_num_pending_dispatches" value: "256" } }`),
    );
    expect(gpuProvidersOf(config)[0]!.options).toEqual({
      storageBufferCacheMode: 'simple',
      uniformBufferCacheMode: 'lazyRelease',
      'ep.webgpuexecutionprovider.maxNumPendingDispatches': '256',
    });
    for (const [key, value, expected] of [
      ['max_num_pending_dispatches', '0', 'an integer from 1 to 4096'],
      ['max_num_pending_dispatches', '4097', 'an integer from 1 to 4096'],
      ['storage_buffer_cache_mode', 'lru', 'one of disabled, lazyRelease, simple, bucket'],
    ]) {
      const text = accelerators(`{ name: "webgpu" parameters { key: "${key}" value: "${value}" } }`);
      expect(() => gpuProvidersOf(parseModelConfig(text))).toThrow(`parameters['${key}']: must be ${expected}, got '${value}'`);
    }
  });

  it('asks for CUDA alone when the config names no accelerator', () => {
    expect(gpuProvidersOf(parseModelConfig('name: "m"'))).toEqual([{ name: 'cuda', options: {}, sources: {} }]);
  });

  it('reads a model parameter named as one of Object.prototype’s as any other unknown one: not a CUDA option', () => {
    const config = parseModelConfig(
      'name: "m"\nparameters { key: "valueOf" value: {} }\nparameters { key: "constructor" value: { string_value: "1" } }',
    );
    expect(gpuProvidersOf(config)).toEqual([{ name: 'cuda', options: {}, sources: {} }]);
  });
});

describe('a bad accelerator is a config error at its file position, naming the field', () => {
  const cases: [what: string, text: string, needle: string | [string, number], message: RegExp][] = [
    [
      'an unknown accelerator',
      accelerators('{ name: "openvino" }'),
      '"openvino"',
      /gpu_execution_accelerator\[0\]\.name: unknown GPU execution accelerator 'openvino'; expected one of tensorrt, cuda, webgpu/,
    ],
    [
      'an unknown precision mode',
      accelerators('{ name: "tensorrt" parameters { key: "precision_mode" value: "FP8" } }'),
      '"FP8"',
      /gpu_execution_accelerator\[0\]\.parameters\['precision_mode'\]: unsupported precision mode 'FP8'; expected one of FP32, FP16, BF16, INT8/,
    ],
    [
      'a workspace size that is not a number',
      accelerators('{ name: "cuda" }, { name: "tensorrt" parameters { key: "max_workspace_size_bytes" value: "1 GiB" } }'),
      '"1 GiB"',
      /gpu_execution_accelerator\[1\]\.parameters\['max_workspace_size_bytes'\]: must be a non-negative integer, got '1 GiB'/,
    ],
    [
      'a TensorRT boolean that is not one',
      accelerators('{ name: "tensorrt" parameters { key: "trt_engine_cache_enable" value: "sometimes" } }'),
      '"sometimes"',
      /parameters\['trt_engine_cache_enable'\]: must be true or false \(1 or 0\), got 'sometimes'/,
    ],
    [
      'an unknown TensorRT parameter',
      accelerators('{ name: "tensorrt" parameters { key: "fp16" value: "1" } }'),
      '"1"',
      /parameters\['fp16'\]: unknown parameter 'fp16' for the TensorRT accelerator; expected precision_mode or one of max_workspace_size_bytes/,
    ],
    [
      'a parameter named as one of Object.prototype’s',
      accelerators('{ name: "webgpu" parameters { key: "constructor" value: "1" } }'),
      '"1"',
      /parameters\['constructor'\]: unknown parameter 'constructor' for the WebGPU accelerator/,
    ],
    [
      'a TensorRT precision mode named as one of Object.prototype’s',
      accelerators('{ name: "tensorrt" parameters { key: "precision_mode" value: "toString" } }'),
      '"toString"',
      /parameters\['precision_mode'\]: unsupported precision mode 'toString'/,
    ],
    [
      'a CUDA option the server owns',
      accelerators('{ name: "cuda" parameters { key: "device_id" value: "1" } }'),
      '"1"',
      /parameters\['device_id'\]: 'device_id' is set by the server/,
    ],
    [
      'a CUDA enum value ONNX Runtime does not know',
      accelerators('{ name: "cuda" parameters { key: "cudnn_conv_algo_search" value: "FASTEST" } }'),
      '"FASTEST"',
      /parameters\['cudnn_conv_algo_search'\]: must be one of EXHAUSTIVE, HEURISTIC, DEFAULT, got 'FASTEST'/,
    ],
    [
      'a model parameter out of Triton’s range',
      'name: "m"\nparameters { key: "cudnn_conv_algo_search" value: { string_value: "3" } }',
      '{ string_value',
      /^config\.pbtxt:\d+:\d+: parameters\['cudnn_conv_algo_search'\]: must be 0 \(EXHAUSTIVE\), 1 \(HEURISTIC\), 2 \(DEFAULT\), got '3'/,
    ],
    [
      'webgpu listed with CUDA',
      accelerators('{ name: "webgpu" }, { name: "cuda" }'),
      '"cuda"',
      /gpu_execution_accelerator\[1\]\.name: accelerator 'cuda' cannot be listed with 'webgpu'/,
    ],
    [
      'CUDA graphs on a webgpu model',
      'name: "m"\noptimization { cuda { graphs: true } execution_accelerators { gpu_execution_accelerator: [ { name: "webgpu" } ] } }',
      'true',
      /optimization\.cuda\.graphs: CUDA graphs are for the CUDA provider/,
    ],
    [
      'an accelerator listed twice',
      accelerators('{ name: "cuda" }, { name: "cuda" }'),
      ['"cuda"', 1],
      /gpu_execution_accelerator\[1\]\.name: accelerator 'cuda' is listed twice \(first as #0\)/,
    ],
    [
      'a CPU accelerator',
      'name: "m"\noptimization { execution_accelerators { cpu_execution_accelerator: [ { name: "openvino" } ] } }',
      '"openvino"',
      /cpu_execution_accelerator\[0\]\.name: unknown CPU execution accelerator 'openvino': ONNX Runtime for Node\.js has none/,
    ],
  ];
  it.each(cases)('%s', (_, text, needle, message) => {
    const error = errorOf(text);
    expect(error).toMatch(message);
    const position = typeof needle === 'string' ? at(text, needle) : at(text, ...needle);
    expect(error.startsWith(`config.pbtxt:${position}: `), `${error} at ${position}`).toBe(true);
  });
});
