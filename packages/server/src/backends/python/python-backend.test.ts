import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeModelConfig } from '../../config/normalize.ts';
import { parseModelConfig } from '../../config/parse.ts';
import type { InstanceOptions, LoadedInstance } from '../backend.ts';
import { createPythonBackend } from './python-backend.ts';

/** Records initialize(args) and the CUDA_VISIBLE_DEVICES it was started with, per instance. */
const RECORD_PY = `
import json, os
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        record = dict(args, CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES"), pid=os.getpid())
        with open(os.path.join(args["model_repository"], "init-" + args["model_instance_name"] + ".json"), "w") as f:
            json.dump(record, f)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for _ in requests]
`;

const CONFIG = `
name: "torch_like"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_GPU count: 2 gpus: [ 0, 1 ] } ]
`;

const metrics = { processDied: () => undefined, customMetric: () => undefined };
const logger = pino({ level: 'silent' });
let modelDir: string;

beforeAll(async () => {
  modelDir = await mkdtemp(join(tmpdir(), 'batchwise-python-gpu-'));
  await mkdir(join(modelDir, '1'));
  await writeFile(join(modelDir, '1', 'model.py'), RECORD_PY);
});

afterAll(async () => {
  await rm(modelDir, { recursive: true, force: true });
});

/** What model-loader.ts asks of the backend for one placement of the config's KIND_GPU group. */
function gpuInstance(deviceId: number, index: number, allowCpuFallback = false): InstanceOptions {
  const config = normalizeModelConfig(parseModelConfig(CONFIG), { visibleGpuIds: [0, 1] });
  return {
    modelName: 'torch_like',
    modelPath: join(modelDir, '1', 'model.py'),
    device: 'gpu',
    deviceId,
    allowCpuFallback,
    sessionOptions: {},
    model: {
      config,
      version: '1',
      modelDir,
      versionDir: join(modelDir, '1'),
      instanceName: `${config.instance_group![0]!.name}_${index}`,
      kind: 'KIND_GPU',
    },
  };
}

const recorded = async (instanceName: string) => JSON.parse(await readFile(join(modelDir, `init-${instanceName}.json`), 'utf8'));

describe('KIND_GPU Python instances', () => {
  it("start one process per GPU placement, told Triton's kind and device id, CUDA_VISIBLE_DEVICES untouched", async () => {
    const saved = process.env['CUDA_VISIBLE_DEVICES'];
    process.env['CUDA_VISIBLE_DEVICES'] = '1,0';
    const backend = createPythonBackend({ logger, metrics, visibleGpuIds: [0, 1] });
    const placements = [
      [0, 0],
      [0, 1],
      [1, 2],
      [1, 3],
    ] as const;
    const loaded: LoadedInstance[] = [];
    try {
      for (const [deviceId, index] of placements) loaded.push(await backend.createInstance(gpuInstance(deviceId, index)));
      const records = await Promise.all(placements.map(([, index]) => recorded(`torch_like_0_${index}`)));
      expect(records.map((r) => [r.model_instance_kind, r.model_instance_device_id])).toEqual([
        ['GPU', '0'],
        ['GPU', '0'],
        ['GPU', '1'],
        ['GPU', '1'],
      ]);
      for (const r of records) expect(r.CUDA_VISIBLE_DEVICES).toBe('1,0');
      expect(new Set(records.map((r) => r.pid)).size).toBe(4);
      for (const l of loaded) expect(l.fallbackReason).toBeUndefined();
    } finally {
      await Promise.all(loaded.map((l) => l.instance.close()));
      if (saved === undefined) delete process.env['CUDA_VISIBLE_DEVICES'];
      else process.env['CUDA_VISIBLE_DEVICES'] = saved;
    }
  });

  it('fail to load, starting no process, where their GPU is not visible', async () => {
    const backend = createPythonBackend({ logger, metrics, visibleGpuIds: [] });
    await expect(backend.createInstance(gpuInstance(0, 7))).rejects.toThrow(
      /^instance group torch_like_0 of model torch_like has kind KIND_GPU but no GPUs are available/,
    );
    await expect(readFile(join(modelDir, 'init-torch_like_0_7.json'))).rejects.toThrow(/ENOENT/);
    const oneGpu = createPythonBackend({ logger, metrics, visibleGpuIds: [0] });
    await expect(oneGpu.createInstance(gpuInstance(1, 8))).rejects.toThrow(/specifies invalid or unsupported gpu id 1/);
  });

  it('run as KIND_CPU with --allow-cpu-fallback, saying why', async () => {
    const backend = createPythonBackend({ logger, metrics, visibleGpuIds: [] });
    const loaded = await backend.createInstance(gpuInstance(1, 9, true));
    try {
      const r = await recorded('torch_like_0_9');
      expect([r.model_instance_kind, r.model_instance_device_id]).toEqual(['CPU', '0']);
      expect(loaded.fallbackReason).toMatch(/has kind KIND_GPU but no GPUs are available/);
    } finally {
      await loaded.instance.close();
    }
  });
});
