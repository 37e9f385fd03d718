import { describe, expect, it } from 'vitest';
import { onnxRuntimeBackend } from './onnxruntime-backend.ts';

describe('placing a webgpu instance', () => {
  it('refuses a GPU other than 0: onnxruntime-node lets WebGPU choose its adapter', async () => {
    const created = onnxRuntimeBackend.createInstance({
      modelName: 'm',
      modelPath: '/nowhere/model.onnx',
      device: 'gpu',
      deviceId: 1,
      allowCpuFallback: true,
      sessionOptions: { gpuProviders: [{ name: 'webgpu', options: {}, sources: {} }] },
    });
    await expect(created).rejects.toThrow(/model 'm': the webgpu accelerator cannot place an instance on GPU 1: .*gpus: \[ 0 \]/);
  });
});
