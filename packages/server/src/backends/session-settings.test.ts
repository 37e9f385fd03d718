import { describe, expect, it } from 'vitest';
import { parseModelConfig } from '../config/index.ts';
import { ortSessionOptions } from './onnxruntime/session-options.ts';
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
      gpuMemLimitBytes: 4294967296,
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
    const options = ortSessionOptions({}, 'cuda', 3);
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
