import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity, serializeModel } from '@batchwise/modelgen';
import type { Backend, InstanceOptions } from '../backends/backend.ts';
import { visibleGpuIds } from '../backends/gpu-detect.ts';
import { onnxRuntimeBackend } from '../backends/onnxruntime/onnxruntime-backend.ts';
import { ServerMetrics } from '../metrics/server-metrics.ts';
import { readModelFolder } from '../repository/model-folder.ts';
import { loadVersion, readConfig } from './model-loader.ts';

/** The real ONNX Runtime backend, remembering what each instance was asked for. */
function recordingBackend(): Backend & { readonly asked: InstanceOptions[] } {
  const asked: InstanceOptions[] = [];
  return {
    name: onnxRuntimeBackend.name,
    asked,
    createInstance(options) {
      asked.push(options);
      return onnxRuntimeBackend.createInstance(options);
    },
  };
}

describe('instance placement on the visible GPUs', () => {
  let dir: string;
  let devices: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batchwise-loader-'));
    // A device folder as a host with three GPUs shows it (what gpu-detect reads).
    devices = join(dir, 'dev');
    await mkdir(devices);
    for (const name of ['nvidia0', 'nvidia1', 'nvidia2', 'nvidiactl', 'nvidia-uvm']) await writeFile(join(devices, name), '');
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  async function load(name: string, instanceGroup: string, cudaVisibleDevices?: string) {
    const modelDir = join(dir, name);
    await mkdir(join(modelDir, '1'), { recursive: true });
    await writeFile(join(modelDir, '1', 'model.onnx'), serializeModel(identity('FP32', [4])));
    await writeFile(
      join(modelDir, 'config.pbtxt'),
      `max_batch_size: 8
       input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
       output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
       ${instanceGroup}`,
    );
    const folder = await readModelFolder(modelDir, name);
    const backend = recordingBackend();
    const loaded = await loadVersion(folder, readConfig(folder, { strictModelConfig: false }), 1, {
      backends: [backend],
      metrics: new ServerMetrics({ processMetrics: false }),
      logger: pino({ level: 'silent' }),
      strictModelConfig: false,
      // No CUDA here: each instance runs on CPU, but asks for its own device first.
      allowCpuFallback: true,
      gpuIds: visibleGpuIds(devices, cudaVisibleDevices),
    });
    await Promise.all(loaded.instances.map((i) => i.close()));
    return { loaded, asked: backend.asked.map((o) => `${o.device}:${o.deviceId}`) };
  }

  it('puts count instances of a KIND_GPU group without gpus on every visible GPU, and shows them in the config', async () => {
    const { loaded, asked } = await load('every_gpu', 'instance_group [ { kind: KIND_GPU count: 2 } ]');
    expect(asked.sort()).toEqual(['gpu:0', 'gpu:0', 'gpu:1', 'gpu:1', 'gpu:2', 'gpu:2']);
    expect(loaded.instances).toHaveLength(6);
    expect(loaded.config.instance_group).toEqual([{ name: 'every_gpu_0', kind: 'KIND_GPU', count: 2, gpus: [0, 1, 2] }]);
  });

  it('honours CUDA_VISIBLE_DEVICES and the gpus a group lists', async () => {
    const narrowed = await load('narrowed', 'instance_group [ { kind: KIND_GPU } ]', '2');
    expect(narrowed.asked).toEqual(['gpu:0']);
    const listed = await load('listed', 'instance_group [ { kind: KIND_GPU gpus: [ 1 ] } ]');
    expect(listed.asked).toEqual(['gpu:1']);
  });

  it('resolves the implicit group to the GPUs too, and to one CPU instance without any', async () => {
    const gpu = await load('implicit_gpu', '');
    expect(gpu.asked.sort()).toEqual(['gpu:0', 'gpu:1', 'gpu:2']);
    expect(gpu.loaded.config.instance_group).toEqual([{ name: 'implicit_gpu', kind: 'KIND_GPU', count: 1, gpus: [0, 1, 2] }]);
    const cpu = await load('implicit_cpu', '', '');
    expect(cpu.asked).toEqual(['cpu:0']);
    expect(cpu.loaded.config.instance_group).toEqual([{ name: 'implicit_cpu', kind: 'KIND_CPU', count: 1 }]);
  });
});
