import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../../config/model-config.ts';
import { pythonPlacement, type PlacementRequest } from './gpu-placement.ts';

const config: ModelConfig = {
  name: 'torch_mlp',
  backend: 'python',
  max_batch_size: 8,
  input: [],
  output: [],
  instance_group: [
    { name: 'cpu_pool', kind: 'KIND_CPU', count: 1 },
    { name: 'torch_mlp_1', kind: 'KIND_GPU', count: 2, gpus: [0, 1] },
  ],
};

const gpu = (deviceId: number, allowCpuFallback = false): PlacementRequest => ({
  config,
  instanceName: `torch_mlp_1_${deviceId * 2}`,
  device: 'gpu',
  deviceId,
  allowCpuFallback,
});

describe('pythonPlacement', () => {
  it('tells a KIND_GPU instance the GPU it was placed on, when that GPU is visible', () => {
    expect(pythonPlacement(gpu(1), [0, 1])).toEqual({ kind: 'KIND_GPU', deviceId: 1 });
    expect(pythonPlacement(gpu(0), [0])).toEqual({ kind: 'KIND_GPU', deviceId: 0 });
  });

  it('runs KIND_CPU instances on the CPU as device 0, GPUs or not', () => {
    const cpu: PlacementRequest = { config, instanceName: 'cpu_pool_0', device: 'cpu', deviceId: 0, allowCpuFallback: false };
    expect(pythonPlacement(cpu, [])).toEqual({ kind: 'KIND_CPU', deviceId: 0 });
    expect(pythonPlacement(cpu, [0, 1])).toEqual({ kind: 'KIND_CPU', deviceId: 0 });
  });

  it("fails a KIND_GPU instance where no GPU is visible, in Triton's words and saying what to do", () => {
    const load = () => pythonPlacement(gpu(0), []);
    expect(load).toThrow(/^instance group torch_mlp_1 of model torch_mlp has kind KIND_GPU but no GPUs are available: /);
    expect(load).toThrow(/no \/dev\/nvidia<N> device file, or NVIDIA_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES hide them/);
    expect(load).toThrow(/set instance_group kind: KIND_CPU, or start with --allow-cpu-fallback/);
    try {
      load();
    } catch (error) {
      expect((error as { code?: string }).code).toBe('INVALID_ARG');
    }
  });

  it('fails a KIND_GPU instance on a GPU this process does not see, naming those it sees', () => {
    expect(() => pythonPlacement(gpu(1), [0])).toThrow(
      /^instance group torch_mlp_1 of model torch_mlp specifies invalid or unsupported gpu id 1\. The GPUs this process sees are: 0\. /,
    );
  });

  it('with --allow-cpu-fallback, runs it as KIND_CPU and says why', () => {
    const placed = pythonPlacement(gpu(1, true), []);
    expect(placed.kind).toBe('KIND_CPU');
    expect(placed.deviceId).toBe(0);
    expect(placed.fallbackReason).toMatch(/^instance group torch_mlp_1 of model torch_mlp has kind KIND_GPU but no GPUs are available/);
  });
});
