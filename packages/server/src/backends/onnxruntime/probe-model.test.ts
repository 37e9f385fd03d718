import { describe, expect, it } from 'vitest';
import { identity, serializeModel } from '@batchwise/modelgen';
import { probeModelBytes } from './probe-model.ts';
import { probeExecutionProvider } from './provider-probe.ts';
import { visibleGpuIds } from '../gpu-detect.ts';

describe('execution provider probe', () => {
  it('embeds exactly what the generator writes', () => {
    expect(Buffer.from(probeModelBytes()).equals(Buffer.from(serializeModel(identity('FP32', [1]))))).toBe(true);
  });

  it('finds the CPU provider usable', async () => {
    expect(await probeExecutionProvider('cpu')).toEqual({ provider: 'cpu', usable: true });
  });

  it.skipIf(visibleGpuIds().length > 0)('explains why CUDA is not usable on a machine without a GPU', async () => {
    const probe = await probeExecutionProvider('cuda');
    expect(probe.usable).toBe(false);
    expect(probe.reason).toMatch(/CUDA execution provider/);
    expect(probe.reason).toMatch(/ONNXRUNTIME_NODE_INSTALL=cuda12/);
  });
});
