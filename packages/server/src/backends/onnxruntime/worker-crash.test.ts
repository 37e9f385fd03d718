import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity, serializeModel, slowModel } from '@batchwise/modelgen';
import { onnxRuntimeBackend } from './onnxruntime-backend.ts';

const options = (modelPath: string) => ({
  modelName: 'crashy',
  modelPath,
  device: 'cpu' as const,
  deviceId: 0,
  allowCpuFallback: false,
  sessionOptions: {},
});

const input = (rows: number, width: number) => ({
  name: 'INPUT0',
  datatype: 'FP32' as const,
  shape: [rows, width],
  data: new Uint8Array(new Float32Array(rows * width).fill(0.5).buffer),
});

describe('a model instance whose worker dies', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batchwise-crash-'));
    await writeFile(join(dir, 'slow.onnx'), serializeModel(slowModel({ repeats: 4000, width: 256 })));
    await writeFile(join(dir, 'id.onnx'), serializeModel(identity('FP32', [4])));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  // Terminating a thread inside a native ONNX Runtime call aborts the whole process, so the
  // worker is killed between runs; a native crash inside a run is not containable by threads.
  it('is replaced, and the next batch runs', async () => {
    const { instance } = await onnxRuntimeBackend.createInstance(options(join(dir, 'slow.onnx')));
    await instance.execute([input(1, 256)], ['OUTPUT0']);
    await (instance as unknown as { crashForTesting(): Promise<number> }).crashForTesting();
    const after = await instance.execute([input(1, 256)], ['OUTPUT0']);
    expect(after.outputs[0]!.shape).toEqual([1, 256]);
    await instance.close();
  });

  it('gives up after repeated crashes and says why', async () => {
    const { instance } = await onnxRuntimeBackend.createInstance(options(join(dir, 'id.onnx')));
    let fatal: Error | undefined;
    instance.onFatal = (e) => (fatal = e);
    for (let i = 0; i < 4; i++) {
      await instance.execute([input(1, 4)], ['OUTPUT0']);
      await (instance as unknown as { crashForTesting(): Promise<number> }).crashForTesting();
    }
    await expect(instance.execute([input(1, 4)], ['OUTPUT0'])).rejects.toThrow(/crashed 4 times/);
    expect(fatal?.message).toMatch(/not restarted/);
  });
});
