import { describe, expect, it } from 'vitest';
import { normalizeModelConfig, parseModelConfig, printModelConfig } from './index.ts';

describe('normalizeModelConfig', () => {
  const bare = parseModelConfig('name: "resnet" max_batch_size: 8');

  it('fills the Triton defaults, with one instance on the GPU when there is one', () => {
    expect(normalizeModelConfig(bare, { gpuAvailable: true })).toEqual({
      name: 'resnet',
      max_batch_size: 8,
      input: [],
      output: [],
      version_policy: { latest: { num_versions: 1 } },
      instance_group: [{ name: 'resnet_0', kind: 'KIND_GPU', count: 1 }],
      default_model_filename: 'model.onnx',
      backend: 'onnxruntime',
      platform: 'onnxruntime_onnx',
    });
    expect(normalizeModelConfig(bare, { gpuAvailable: false }).instance_group).toEqual([
      { name: 'resnet_0', kind: 'KIND_CPU', count: 1 },
    ]);
  });

  it('completes existing groups: names by index, count 1, KIND_AUTO resolved, explicit kinds kept', () => {
    const c = parseModelConfig(`
      name: "m"
      instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0 ] }, { name: "cpu" kind: KIND_CPU }, { kind: KIND_AUTO }, {}, { kind: KIND_MODEL } ]
    `);
    expect(normalizeModelConfig(c, { gpuAvailable: false }).instance_group).toEqual([
      { name: 'm_0', kind: 'KIND_GPU', count: 2, gpus: [0] },
      { name: 'cpu', kind: 'KIND_CPU', count: 1 },
      { name: 'm_2', kind: 'KIND_CPU', count: 1 },
      { name: 'm_3', kind: 'KIND_CPU', count: 1 },
      { name: 'm_4', kind: 'KIND_MODEL', count: 1 },
    ]);
    expect(normalizeModelConfig(c, { gpuAvailable: true }).instance_group![2]!.kind).toBe('KIND_GPU');
  });

  it('keeps what the config sets', () => {
    const c = parseModelConfig(`
      name: "m" backend: "python" platform: "x" default_model_filename: "net.onnx"
      version_policy { all {} }
    `);
    expect(normalizeModelConfig(c, { gpuAvailable: true })).toMatchObject({
      backend: 'python', platform: 'x', default_model_filename: 'net.onnx', version_policy: { all: {} },
    });
  });

  it('does not mutate its input, and its output prints and parses back', () => {
    const c = parseModelConfig('name: "m" instance_group [ { count: 2 } ]');
    const before = structuredClone(c);
    const normalized = normalizeModelConfig(c, { gpuAvailable: true });
    expect(c).toEqual(before);
    expect(parseModelConfig(printModelConfig(normalized))).toEqual(normalized);
  });
});
