import { describe, expect, it } from 'vitest';
import { parseModelConfig } from '../config/index.ts';
import ort from 'onnxruntime-node';
import { probeModelBytes } from './onnxruntime/probe-model.ts';
import { ortSessionOptions, providerNames, unappliedProviderOptions } from './onnxruntime/session-options.ts';
import { sessionSettingsFromConfig } from './session-settings.ts';

const config = (extra: string) =>
  parseModelConfig(
    `name: "m" max_batch_size: 4 input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ] output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ] ${extra}`,
  );

describe('session settings from config.pbtxt (Triton onnxruntime backend names)', () => {
  it('maps thread counts, execution mode, arenas, graph level and the CUDA memory limit', () => {
    const settings = sessionSettingsFromConfig(
      config(`
        parameters { key: "intra_op_thread_count" value: { string_value: "2" } }
        parameters { key: "inter_op_thread_count" value: { string_value: "1" } }
        parameters { key: "execution_mode" value: { string_value: "1" } }
        parameters { key: "enable_mem_arena" value: { string_value: "0" } }
        parameters { key: "enable_mem_pattern" value: { string_value: "true" } }
        optimization { graph { level: -1 }
          execution_accelerators { gpu_execution_accelerator: [ { name: "cuda" parameters { key: "gpu_mem_limit" value: "4294967296" } } ] } }`),
    );
    expect(settings).toEqual({
      intraOpThreads: 2,
      interOpThreads: 1,
      executionMode: 'parallel',
      enableCpuMemArena: false,
      enableMemPattern: true,
      graphOptimizationLevel: 'basic',
      gpuProviders: [{ name: 'cuda', options: { gpu_mem_limit: '4294967296' }, sources: { gpu_mem_limit: 'gpu_mem_limit' } }],
    });
    expect(ortSessionOptions(settings, 'cpu', 0)).toEqual({
      executionProviders: ['cpu'],
      intraOpNumThreads: 2,
      interOpNumThreads: 1,
      executionMode: 'parallel',
      graphOptimizationLevel: 'basic',
      enableCpuMemArena: false,
      enableMemPattern: true,
      extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
    });
  });

  it("passes parameters named session.* to ONNX Runtime as session config entries, over the server's defaults", () => {
    const settings = sessionSettingsFromConfig(
      config(`
        parameters { key: "session.intra_op.allow_spinning" value: { string_value: "1" } }
        parameters { key: "session.use_device_allocator_for_initializers" value: { string_value: "1" } }
        parameters { key: "intra_op_thread_count" value: { string_value: "1" } }`),
    );
    expect(settings.sessionConfigEntries).toEqual({
      'session.intra_op.allow_spinning': '1',
      'session.use_device_allocator_for_initializers': '1',
    });
    expect(ortSessionOptions(settings, 'cpu', 0).extra).toEqual({
      session: { intra_op: { allow_spinning: '1' }, inter_op: { allow_spinning: '0' }, use_device_allocator_for_initializers: '1' },
    });
    const clash = sessionSettingsFromConfig(
      config(`
        parameters { key: "session.a" value: { string_value: "1" } }
        parameters { key: "session.a.b" value: { string_value: "1" } }`),
    );
    expect(() => ortSessionOptions(clash, 'cpu', 0)).toThrow(/session config entry 'session.a.b' nests under 'a'/);
  });

  it("asks ONNX Runtime for the CUDA provider on the instance's GPU, never with a CPU fallback", () => {
    const options = ortSessionOptions({}, 'gpu', 3);
    expect(options.executionProviders).toEqual([{ name: 'cuda', deviceId: 3 }]);
  });

  it('treats 0 threads as "let ONNX Runtime decide", as Triton does', () => {
    expect(sessionSettingsFromConfig(config('parameters { key: "intra_op_thread_count" value: { string_value: "0" } }'))).toEqual({});
  });

  it('refuses nonsense values, naming the model and the parameter', () => {
    expect(() => sessionSettingsFromConfig(config('parameters { key: "intra_op_thread_count" value: { string_value: "many" } }'))).toThrow(
      /model 'm': parameter 'intra_op_thread_count' must be a non-negative integer/,
    );
    expect(() => sessionSettingsFromConfig(config('parameters { key: "enable_mem_arena" value: { string_value: "maybe" } }'))).toThrow(
      /enable_mem_arena/,
    );
  });
});

describe('execution accelerators, as onnxruntime-node 1.30 receives them', () => {
  const gpuConfig = (list: string, rest = '') =>
    config(`optimization { execution_accelerators { gpu_execution_accelerator: [ ${list} ] } } ${rest}`);

  it('gives TensorRT then CUDA the device id, and names every TensorRT option it cannot pass on', () => {
    const settings = sessionSettingsFromConfig(
      gpuConfig(`{ name: "tensorrt"
        parameters { key: "precision_mode" value: "FP16" }
        parameters { key: "max_workspace_size_bytes" value: "1073741824" } }`),
    );
    expect(ortSessionOptions(settings, 'gpu', 1).executionProviders).toEqual([
      { name: 'tensorrt', deviceId: 1 },
      { name: 'cuda', deviceId: 1 },
    ]);
    expect(providerNames(settings, 'gpu')).toBe('TensorrtExecutionProvider,CUDAExecutionProvider');
    expect(unappliedProviderOptions(settings)).toEqual({
      precision_mode: 'trt_fp16_enable=1 not applied: onnxruntime-node 1.30 passes only the device id to the TensorRT execution provider',
      max_workspace_size_bytes:
        'trt_max_workspace_size=1073741824 not applied: onnxruntime-node 1.30 passes only the device id to the TensorRT execution provider',
    });
  });

  it('names the CUDA options it cannot pass on, with the config field that set each', () => {
    const settings = sessionSettingsFromConfig(
      config(`optimization { cuda { graphs: true } }
        parameters { key: "gpu_mem_limit" value: { string_value: "1073741824" } }`),
    );
    expect(ortSessionOptions(settings, 'gpu', 0).executionProviders).toEqual([{ name: 'cuda', deviceId: 0 }]);
    expect(Object.keys(unappliedProviderOptions(settings))).toEqual(['gpu_mem_limit', 'optimization.cuda.graphs']);
    expect(unappliedProviderOptions(settings)['optimization.cuda.graphs']).toMatch(/^enable_cuda_graph=1 not applied/);
  });

  it('gives WebGPU its options in the types the binding checks, and no device', async () => {
    const settings = sessionSettingsFromConfig(
      gpuConfig(`{ name: "webgpu"
        parameters { key: "preferred_layout" value: "NCHW" }
        parameters { key: "validation_mode" value: "basic" }
        parameters { key: "enable_robustness" value: "true" }
        parameters { key: "force_cpu_node_names" value: "a, b" } }`),
    );
    const options = ortSessionOptions(settings, 'gpu', 0);
    expect(options.executionProviders).toEqual([
      { name: 'webgpu', preferredLayout: 'NCHW', validationMode: 'basic', enableRobustness: true, forceCpuNodeNames: ['a', 'b'] },
    ]);
    expect(providerNames(settings, 'gpu')).toBe('WebGpuExecutionProvider');
    expect(unappliedProviderOptions(settings)).toEqual({});
    // The binding refuses an option it does not know, or of the wrong type, before it looks for an adapter:
    // these pass that check (the session opens where a Vulkan adapter exists, and fails for want of one here).
    const opened = await ort.InferenceSession.create(probeModelBytes(), options).then(
      (session) => session.release().then(() => 'opened'),
      (error: Error) => error.message,
    );
    expect(opened).toMatch(/^opened$|Failed to get a WebGPU adapter/);
    const refused = await ort.InferenceSession.create(probeModelBytes(), {
      executionProviders: [{ name: 'webgpu', enableRobustness: 'yes' } as never],
    }).catch((error: Error) => error.message);
    expect(refused).toMatch(/"enableRobustness" must be a boolean/);
  });

  it("passes WebGPU's buffer caches to the binding and its pending dispatches as the provider's session config entry", async () => {
    const settings = sessionSettingsFromConfig(
      gpuConfig(`{ name: "webgpu"
        parameters { key: "storage_buffer_cache_mode" value: "simple" }
        parameters { key: "uniform_buffer_cache_mode" value: "disabled" }
        parameters { key: "max_num_pending_dispatches" value: "64" } }`),
    );
    const options = ortSessionOptions(settings, 'gpu', 0);
    expect(options.executionProviders).toEqual([{ name: 'webgpu', storageBufferCacheMode: 'simple', uniformBufferCacheMode: 'disabled' }]);
    expect(options.extra).toMatchObject({ ep: { webgpuexecutionprovider: { maxNumPendingDispatches: '64' } } });
    // A KIND_CPU instance of the same config gets no provider entry.
    expect(ortSessionOptions(settings, 'cpu', 0).extra).not.toHaveProperty('ep');
    // The binding and ONNX Runtime take all three (where no adapter exists, the session fails for want of one).
    const opened = await ort.InferenceSession.create(probeModelBytes(), options).then(
      (session) => session.release().then(() => 'opened'),
      (error: Error) => error.message,
    );
    expect(opened).toMatch(/^opened$|Failed to get a WebGPU adapter/);
  });

  it('runs a KIND_CPU instance on the CPU whatever accelerators the config names', () => {
    const settings = sessionSettingsFromConfig(gpuConfig('{ name: "webgpu" }'));
    expect(ortSessionOptions(settings, 'cpu', 0).executionProviders).toEqual(['cpu']);
    expect(providerNames(settings, 'cpu')).toBe('CPUExecutionProvider');
  });

  it('refuses a bad accelerator in a config that came as JSON, naming the model and the field', () => {
    const json = { ...config(''), optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'rocm' }] } } };
    expect(() => sessionSettingsFromConfig(json)).toThrow(
      "model 'm': optimization.execution_accelerators.gpu_execution_accelerator[0].name: unknown GPU execution accelerator 'rocm'",
    );
  });
});
