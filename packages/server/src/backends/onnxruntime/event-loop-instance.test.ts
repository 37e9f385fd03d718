import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity, mlp, serializeModel, slowModel } from '@batchwise/modelgen';
import type { ModelConfig } from '../../config/model-config.ts';
import type { InstanceDevice, InstanceOptions, ModelInstance } from '../backend.ts';
import { onnxRuntimeBackend } from './onnxruntime-backend.ts';

const WIDTH = 8;

function config(overrides: Partial<ModelConfig> = {}, dims = [WIDTH]): ModelConfig {
  return {
    name: 'm',
    max_batch_size: 16,
    input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims }],
    output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims }],
    ...overrides,
  };
}

function options(modelPath: string, modelConfig: ModelConfig, device: InstanceDevice = 'cpu'): InstanceOptions {
  return {
    modelName: 'm',
    modelPath,
    device,
    deviceId: 0,
    allowCpuFallback: false,
    sessionOptions: {},
    model: { config: modelConfig, version: '1', modelDir: '', versionDir: '', instanceName: 'm_0', kind: 'KIND_CPU' },
  };
}

async function answer(instance: ModelInstance, input: Float32Array, rows: number): Promise<number[]> {
  const { outputs } = await instance.execute(
    [{ name: 'INPUT0', datatype: 'FP32', shape: [rows, WIDTH], data: new Uint8Array(input.slice().buffer) }],
    ['OUTPUT0'],
  );
  expect(outputs[0]!.shape).toEqual([rows, WIDTH]);
  return Array.from(new Float32Array(outputs[0]!.data.buffer, outputs[0]!.data.byteOffset, rows * WIDTH));
}

/** The timing rule with room to spare: on a saturated machine one preempted run of the small models can pass the default 500 us. */
const ROOMY = { parameters: { batchwise_event_loop_run_us: { string_value: '100000' } } };

describe('an ONNX instance on the event loop', () => {
  let dir: string;
  let small: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batchwise-event-loop-'));
    small = join(dir, 'mlp.onnx');
    await writeFile(small, serializeModel(mlp({ layers: 2, width: WIDTH })));
    await writeFile(join(dir, 'slow.onnx'), serializeModel(slowModel({ repeats: 400, width: 64 })));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('runs a small fixed-size model on the event loop, answering as ONNX Runtime in-process', async () => {
    const { instance, io, eventLoopRunUs } = await onnxRuntimeBackend.createInstance(options(small, config(ROOMY)));
    expect(eventLoopRunUs).toBeGreaterThan(0);
    expect(io.outputs.map((o) => o.name)).toEqual(['OUTPUT0']);
    const rows = 5;
    const input = Float32Array.from({ length: rows * WIDTH }, (_, i) => Math.sin(i) * 3);
    const session = await ort.InferenceSession.create(small);
    const expected = Array.from(
      (await session.run({ INPUT0: new ort.Tensor('float32', input, [rows, WIDTH]) }))['OUTPUT0']!.data as Float32Array,
    );
    await session.release();

    expect(await answer(instance, input, rows)).toEqual(expected);
    // Twice: the second run reuses nothing of the first.
    expect(await answer(instance, input, rows)).toEqual(expected);
    // In place (the scheduler's call): the same answer, returned rather than promised.
    expect(instance.executeNow).toBeTypeOf('function');
    const now = instance.executeNow!(
      [{ name: 'INPUT0', datatype: 'FP32', shape: [rows, WIDTH], data: new Uint8Array(input.slice().buffer) }],
      ['OUTPUT0'],
    );
    expect(Array.from(new Float32Array(now.outputs[0]!.data.buffer, now.outputs[0]!.data.byteOffset, rows * WIDTH))).toEqual(expected);
    expect(now.timings.computeInferNs).toBeGreaterThan(0);
    await instance.close();
  });

  it('throws what ONNX Runtime refuses in place, keeps serving, and refuses runs once closed', async () => {
    const { instance } = await onnxRuntimeBackend.createInstance(options(small, config(ROOMY)));
    const wrongWidth = [{ name: 'INPUT0', datatype: 'FP32' as const, shape: [1, WIDTH + 1], data: new Uint8Array(4 * (WIDTH + 1)) }];
    expect(() => instance.executeNow!(wrongWidth, ['OUTPUT0'])).toThrow(/INPUT0|dimension|Got invalid dimensions/i);
    await expect(instance.execute(wrongWidth, ['OUTPUT0'])).rejects.toThrow();
    expect(await answer(instance, new Float32Array(WIDTH), 1)).toHaveLength(WIDTH);
    await instance.close();
    expect(() => instance.executeNow!(wrongWidth, ['OUTPUT0'])).toThrow(/closed/);
    await expect(instance.execute(wrongWidth, ['OUTPUT0'])).rejects.toThrow(/closed/);
  });

  it('runs a model without batching (max_batch_size 0) on the event loop, answering as ONNX Runtime in-process', async () => {
    const fixed = join(dir, 'identity.onnx');
    await writeFile(fixed, serializeModel(identity('FP32', [3, WIDTH], { batch: false })));
    const noBatch = config({ max_batch_size: 0, ...ROOMY }, [3, WIDTH]);
    const { instance, eventLoopRunUs } = await onnxRuntimeBackend.createInstance(options(fixed, noBatch));
    expect(eventLoopRunUs).toBeGreaterThan(0);
    const input = Float32Array.from({ length: 3 * WIDTH }, (_, i) => i / 7 - 1);
    const { outputs } = await instance.execute(
      [{ name: 'INPUT0', datatype: 'FP32', shape: [3, WIDTH], data: new Uint8Array(input.slice().buffer) }],
      ['OUTPUT0'],
    );
    const session = await ort.InferenceSession.create(fixed);
    const expected = (await session.run({ INPUT0: new ort.Tensor('float32', input, [3, WIDTH]) }))['OUTPUT0']!;
    await session.release();
    expect(outputs[0]!.shape).toEqual([3, WIDTH]);
    expect(Array.from(new Float32Array(outputs[0]!.data.buffer, outputs[0]!.data.byteOffset, 3 * WIDTH))).toEqual(
      Array.from(expected.data as Float32Array),
    );
    await instance.close();
  });

  it.each([
    ['batchwise_event_loop_run_us is 0', config({ parameters: { batchwise_event_loop_run_us: { string_value: '0' } } })],
    ['a dimension is variable', config({}, [-1])],
    ['it has two instances', config({ instance_group: [{ kind: 'KIND_CPU', count: 2 }] })],
    ['its config lists no inputs', config({ input: [] })],
  ])('stays in a worker when %s', async (_why, modelConfig) => {
    const { instance, eventLoopRunUs } = await onnxRuntimeBackend.createInstance(options(small, modelConfig));
    expect(eventLoopRunUs).toBeUndefined();
    await instance.close();
  });

  it('stays in a worker when a full batch takes longer than the limit', async () => {
    const slow = config({ max_batch_size: 8, parameters: { batchwise_event_loop_run_us: { string_value: '20' } } }, [64]);
    const { instance, eventLoopRunUs } = await onnxRuntimeBackend.createInstance(options(join(dir, 'slow.onnx'), slow));
    expect(eventLoopRunUs).toBeUndefined();
    await instance.close();
  });

  it('refuses a limit that is not a number of microseconds, naming the parameter', async () => {
    const bad = config({ parameters: { batchwise_event_loop_run_us: { string_value: 'fast' } } });
    await expect(onnxRuntimeBackend.createInstance(options(small, bad))).rejects.toThrow(/batchwise_event_loop_run_us .* 'fast'/);
  });
});
