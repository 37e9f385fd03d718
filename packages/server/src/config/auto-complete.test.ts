import { describe, expect, it } from 'vitest';
import { autoCompleteModelConfig, parseModelConfig, validateModelConfig, type ModelConfig, type ModelIO } from './index.ts';

const batchable: ModelIO = {
  inputs: [
    { name: 'input_ids', datatype: 'INT64', dims: [-1, 128] },
    { name: 'mask', datatype: 'INT64', dims: [-1, 128] },
    { name: 'const', datatype: 'FP32', dims: [4], optional: true },
  ],
  outputs: [{ name: 'logits', datatype: 'FP32', dims: [-1, 2] }],
};
const fixedBatch: ModelIO = {
  inputs: [
    { name: 'x', datatype: 'UINT8', dims: [1, 3] },
    { name: 'k', datatype: 'BOOL', dims: [] },
  ],
  outputs: [{ name: 'y', datatype: 'BYTES', dims: [1] }],
};

describe('autoCompleteModelConfig', () => {
  it('builds a full batching config from a batchable model when there is no config', () => {
    const c = autoCompleteModelConfig(undefined, batchable, 'bert');
    expect(c).toEqual({
      name: 'bert',
      backend: 'onnxruntime',
      platform: 'onnxruntime_onnx',
      max_batch_size: 4,
      input: [
        { name: 'input_ids', data_type: 'TYPE_INT64', dims: [128] },
        { name: 'mask', data_type: 'TYPE_INT64', dims: [128] },
      ],
      output: [{ name: 'logits', data_type: 'TYPE_FP32', dims: [2] }],
      dynamic_batching: {},
    });
    expect(() => validateModelConfig(c, batchable)).not.toThrow();
  });

  it('builds a non-batching config when a first dim is fixed, with scalars as dims [1] reshaped to []', () => {
    const c = autoCompleteModelConfig(undefined, fixedBatch, 'm');
    expect(c).toMatchObject({
      max_batch_size: 0,
      input: [
        { name: 'x', data_type: 'TYPE_UINT8', dims: [1, 3] },
        { name: 'k', data_type: 'TYPE_BOOL', dims: [1], reshape: { shape: [] } },
      ],
      output: [{ name: 'y', data_type: 'TYPE_STRING', dims: [1] }],
    });
    expect(c.dynamic_batching).toBeUndefined();
    expect(() => validateModelConfig(c, fixedBatch)).not.toThrow();
  });

  it('fills missing tensors and missing data_type/dims of listed ones, keeping what is given', () => {
    const partial = parseModelConfig(`
      name: "custom"
      max_batch_size: 16
      input [ { name: "mask" format: FORMAT_NONE }, { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] } ]
      instance_group [ { kind: KIND_CPU } ]
    `);
    const before = structuredClone(partial);
    const c = autoCompleteModelConfig(partial, batchable, 'folder');
    expect(partial).toEqual(before);
    expect(c).toEqual({
      name: 'custom',
      backend: 'onnxruntime',
      platform: 'onnxruntime_onnx',
      max_batch_size: 16,
      input: [
        { name: 'mask', format: 'FORMAT_NONE', data_type: 'TYPE_INT64', dims: [128] },
        { name: 'input_ids', data_type: 'TYPE_INT64', dims: [-1] },
      ],
      output: [{ name: 'logits', data_type: 'TYPE_FP32', dims: [2] }],
      instance_group: [{ kind: 'KIND_CPU' }],
      dynamic_batching: {},
    });
  });

  it('uses max_batch_size 4 for a batchable model whose config leaves it at 0', () => {
    const c = autoCompleteModelConfig(parseModelConfig('input [ { name: "mask" } ]'), batchable, 'm');
    expect(c.max_batch_size).toBe(4);
    expect(c.input[0]).toEqual({ name: 'mask', data_type: 'TYPE_INT64', dims: [128] });
  });

  it('keeps max_batch_size 0 when the config writes the batch dim into dims', () => {
    const c = autoCompleteModelConfig(
      parseModelConfig('input [ { name: "mask" data_type: TYPE_INT64 dims: [ -1, 128 ] } ]'),
      batchable,
      'm',
    );
    expect(c.max_batch_size).toBe(0);
    expect(c.dynamic_batching).toBeUndefined();
    expect(c.input[1]).toEqual({ name: 'input_ids', data_type: 'TYPE_INT64', dims: [-1, 128] });
    expect(() => validateModelConfig(c, batchable)).not.toThrow();
  });

  it("keeps max_batch_size 0 when a reshape has the model's full rank, whatever the rank of its dims", () => {
    const c = autoCompleteModelConfig(
      parseModelConfig(
        'max_batch_size: 0 input [ { name: "mask" data_type: TYPE_INT64 dims: [ -1, 16, 8 ] reshape: { shape: [ -1, 128 ] } } ]',
      ),
      batchable,
      'm',
    );
    expect(c.max_batch_size).toBe(0);
    expect(() => validateModelConfig(c, batchable)).not.toThrow();
  });

  it('keeps an existing scheduler and does not add dynamic batching next to it', () => {
    for (const scheduler of ['dynamic_batching { max_queue_delay_microseconds: 5 }', 'sequence_batching {}', 'ensemble_scheduling {}']) {
      const c = autoCompleteModelConfig(parseModelConfig(`max_batch_size: 8 ${scheduler}`), batchable, 'm');
      const set = ['dynamic_batching', 'sequence_batching', 'ensemble_scheduling'].filter((k) => c[k] !== undefined);
      expect(set).toHaveLength(1);
    }
    expect(
      autoCompleteModelConfig(parseModelConfig('max_batch_size: 8 dynamic_batching { max_queue_delay_microseconds: 5 }'), batchable, 'm')
        .dynamic_batching,
    ).toEqual({ max_queue_delay_microseconds: 5 });
  });

  it('turns batching on by default, unless the config opts out with batchwise_dynamic_batching', () => {
    expect(autoCompleteModelConfig(parseModelConfig('max_batch_size: 8'), batchable, 'm').dynamic_batching).toEqual({});
    const optedOut = parseModelConfig(
      'max_batch_size: 8 parameters { key: "batchwise_dynamic_batching" value: { string_value: "false" } }',
    );
    expect(autoCompleteModelConfig(optedOut, batchable, 'm').dynamic_batching).toBeUndefined();
  });

  it('keeps given name, backend and platform', () => {
    const given: ModelConfig = { name: 'n', backend: 'python', platform: 'p', max_batch_size: 0, input: [], output: [] };
    expect(autoCompleteModelConfig(given, batchable, 'folder')).toMatchObject({ name: 'n', backend: 'python', platform: 'p' });
  });

  it('leaves tensors unknown to the model for validation to report', () => {
    const c = autoCompleteModelConfig(parseModelConfig('max_batch_size: 2 input [ { name: "typo" } ]'), batchable, 'm');
    expect(c.input[0]).toEqual({ name: 'typo' });
    expect(() => validateModelConfig(c, batchable)).toThrow(/input 'typo' in the config is not an input of the model/);
  });
});
