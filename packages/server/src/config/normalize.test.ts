import { describe, expect, it } from 'vitest';
import { normalizeModelConfig, parseModelConfig, printModelConfig } from './index.ts';

describe('normalizeModelConfig', () => {
  const bare = parseModelConfig('name: "resnet" max_batch_size: 8');

  it('fills the Triton defaults: one group named after the model, on every visible GPU', () => {
    expect(normalizeModelConfig(bare, { visibleGpuIds: [0] })).toEqual({
      name: 'resnet',
      max_batch_size: 8,
      input: [],
      output: [],
      version_policy: { latest: { num_versions: 1 } },
      instance_group: [{ name: 'resnet', kind: 'KIND_GPU', count: 1, gpus: [0] }],
      default_model_filename: 'model.onnx',
      backend: 'onnxruntime',
      platform: 'onnxruntime_onnx',
    });
    expect(normalizeModelConfig(bare, { visibleGpuIds: [3, 1] }).instance_group).toEqual([
      { name: 'resnet', kind: 'KIND_GPU', count: 1, gpus: [1, 3] },
    ]);
    expect(normalizeModelConfig(bare, { visibleGpuIds: [] }).instance_group).toEqual([{ name: 'resnet', kind: 'KIND_CPU', count: 1 }]);
  });

  it('completes existing groups: names by index, count 1, KIND_AUTO resolved, explicit kinds kept', () => {
    const c = parseModelConfig(`
      name: "m"
      instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0 ] }, { name: "cpu" kind: KIND_CPU }, { kind: KIND_AUTO }, {}, { kind: KIND_MODEL } ]
    `);
    expect(normalizeModelConfig(c, { visibleGpuIds: [] }).instance_group).toEqual([
      { name: 'm_0', kind: 'KIND_GPU', count: 2, gpus: [0] },
      { name: 'cpu', kind: 'KIND_CPU', count: 1 },
      { name: 'm_2', kind: 'KIND_CPU', count: 1 },
      { name: 'm_3', kind: 'KIND_CPU', count: 1 },
      { name: 'm_4', kind: 'KIND_MODEL', count: 1 },
    ]);
    expect(normalizeModelConfig(c, { visibleGpuIds: [0, 1] }).instance_group).toEqual([
      { name: 'm_0', kind: 'KIND_GPU', count: 2, gpus: [0] },
      { name: 'cpu', kind: 'KIND_CPU', count: 1 },
      { name: 'm_2', kind: 'KIND_GPU', count: 1, gpus: [0, 1] },
      { name: 'm_3', kind: 'KIND_GPU', count: 1, gpus: [0, 1] },
      { name: 'm_4', kind: 'KIND_MODEL', count: 1 },
    ]);
  });

  it('places a KIND_GPU group without gpus on every visible GPU, as Triton does', () => {
    const c = parseModelConfig('name: "m" instance_group [ { kind: KIND_GPU count: 2 } ]');
    expect(normalizeModelConfig(c, { visibleGpuIds: [0, 1, 2] }).instance_group).toEqual([
      { name: 'm_0', kind: 'KIND_GPU', count: 2, gpus: [0, 1, 2] },
    ]);
    // No GPU: the group keeps KIND_GPU and no gpus, and fails to load with the CUDA reason.
    expect(normalizeModelConfig(c, { visibleGpuIds: [] }).instance_group).toEqual([{ name: 'm_0', kind: 'KIND_GPU', count: 2 }]);
  });

  it('resolves KIND_AUTO to KIND_CPU when a GPU it lists is not visible', () => {
    const c = parseModelConfig('name: "m" instance_group [ { kind: KIND_AUTO gpus: [ 1 ] }, { gpus: [ 0 ] } ]');
    expect(normalizeModelConfig(c, { visibleGpuIds: [0] }).instance_group).toEqual([
      { name: 'm_0', kind: 'KIND_CPU', count: 1, gpus: [1] },
      { name: 'm_1', kind: 'KIND_GPU', count: 1, gpus: [0] },
    ]);
  });

  it('keeps what the config sets', () => {
    const c = parseModelConfig(`
      name: "m" backend: "python" platform: "x" default_model_filename: "net.onnx"
      version_policy { all {} }
    `);
    expect(normalizeModelConfig(c, { visibleGpuIds: [0] })).toMatchObject({
      backend: 'python',
      platform: 'x',
      default_model_filename: 'net.onnx',
      version_policy: { all: {} },
    });
  });

  it('does not mutate its input, and its output prints and parses back', () => {
    const c = parseModelConfig('name: "m" instance_group [ { count: 2 } ]');
    const before = structuredClone(c);
    const normalized = normalizeModelConfig(c, { visibleGpuIds: [0, 1] });
    expect(c).toEqual(before);
    expect(parseModelConfig(printModelConfig(normalized))).toEqual(normalized);
  });
});
