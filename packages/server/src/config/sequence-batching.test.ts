import { describe, expect, it } from 'vitest';
import type { ModelConfig, ModelSequenceBatching } from './model-config.ts';
import { sequenceControlsOf, sequenceStatesOf, validateSequenceBatching } from './sequence-batching.ts';
import { normalizeModelConfig } from './normalize.ts';
import { autoCompleteModelConfig } from './auto-complete.ts';
import type { ModelIO } from './model-io.ts';

const config = (batcher: ModelSequenceBatching, extra: Partial<ModelConfig> = {}): ModelConfig => ({
  name: 'm',
  max_batch_size: 4,
  input: [{ name: 'INPUT', data_type: 'TYPE_INT32', dims: [1] }],
  output: [{ name: 'OUTPUT', data_type: 'TYPE_INT32', dims: [1] }],
  sequence_batching: batcher,
  ...extra,
});
const start = (control: object) => ({
  control_input: [{ name: 'START', control: [{ kind: 'CONTROL_SEQUENCE_START' as const, ...control }] }],
});

describe('sequence_batching, as Triton checks it', () => {
  it.each([
    [{ control_input: [{ control: [] }] }, 'sequence batching control tensor must have a name for m'],
    [
      {
        control_input: [
          { name: 'A', control: [] },
          { name: 'A', control: [] },
        ],
      },
      "sequence batching control tensor 'A' is specified for multiple control kinds for m",
    ],
    [
      start({}),
      "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_START for m",
    ],
    [
      start({ int32_false_true: [0, 1], fp32_false_true: [0, 1] }),
      "sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' and 'bool_false_true' for CONTROL_SEQUENCE_START for m",
    ],
    [
      start({ int32_false_true: [0] }),
      "sequence batching control 'int32_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_START for m",
    ],
    [
      { control_input: [{ name: 'C', control: [{ kind: 'CONTROL_SEQUENCE_CORRID' as const, data_type: 'TYPE_FP32' }] }] },
      'unexpected data type for control CONTROL_SEQUENCE_CORRID for m. Allowed data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING',
    ],
    [
      {
        control_input: [
          { name: 'C', control: [{ kind: 'CONTROL_SEQUENCE_CORRID' as const, data_type: 'TYPE_UINT64', int32_false_true: [0, 1] }] },
        ],
      },
      "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_CORRID for m",
    ],
    [{ oldest: { preferred_batch_size: [8] } }, 'sequence batching preferred batch size must be <= max batch size for m'],
    [{ direct: { minimum_slot_utilization: 1.5 } }, 'sequence batching minimum slot utilization must be in range (0.0, 1.0] for m'],
    [
      {
        state: [
          {
            input_name: 'I',
            output_name: 'O',
            data_type: 'TYPE_INT32',
            dims: [2],
            initial_state: [{ data_type: 'TYPE_INT32', dims: [2], zero_data: true }],
          },
        ],
      },
      "Field 'name' must be set when using initial_state for state input 'I'.",
    ],
    [
      {
        state: [
          {
            input_name: 'I',
            output_name: 'O',
            data_type: 'TYPE_INT32',
            dims: [-1],
            initial_state: [{ name: 'x', data_type: 'TYPE_FP32', dims: [2], zero_data: true }],
          },
        ],
      },
      "The data type used for 'initial_state' field of state 'I' does not match the state data type.",
    ],
    [
      {
        state: [
          {
            input_name: 'I',
            output_name: 'O',
            data_type: 'TYPE_INT32',
            dims: [3],
            initial_state: [{ name: 'x', data_type: 'TYPE_INT32', dims: [2], zero_data: true }],
          },
        ],
      },
      "'initial_state' dim for input name 'I' doesn't match 'state' dim description. 2 != 3",
    ],
    [
      {
        state: [
          {
            input_name: 'I',
            output_name: 'O',
            data_type: 'TYPE_INT32',
            dims: [-1],
            initial_state: [{ name: 'x', data_type: 'TYPE_INT32', dims: [-1], zero_data: true }],
          },
        ],
      },
      "'initial_state' field for state input name 'I' contains variable dimensions.",
    ],
  ])('%j is refused', (batcher, message) => {
    expect(() => validateSequenceBatching(config(batcher as ModelSequenceBatching), undefined)).toThrow(message);
  });

  it('refuses a response cache, as Triton does, and implicit state for a JavaScript model', () => {
    expect(() => validateSequenceBatching(config({}, { response_cache: { enable: true } }), undefined)).toThrow(
      'Response Cache does not currently support model m with sequence batching scheduler. Please disable the response cache.',
    );
    expect(() => validateSequenceBatching(config({}, { backend: 'js', model_transaction_policy: { decoupled: true } }), undefined)).toThrow(
      /a decoupled model .* cannot have sequence_batching/,
    );
    const state = [{ input_name: 'I', output_name: 'O', data_type: 'TYPE_INT32', dims: [1] }];
    expect(() => validateSequenceBatching(config({ state }, { backend: 'js' }), undefined)).toThrow(
      /implicit state .* JavaScript models do not/,
    );
  });

  it('reads each control, a missing kind as START (the enum zero), and the states', () => {
    const batcher: ModelSequenceBatching = {
      control_input: [
        { name: 'S', control: [{ fp32_false_true: [0, 1] }] },
        { name: 'R', control: [{ kind: 'CONTROL_SEQUENCE_READY', bool_false_true: [false, true] }] },
        { name: 'C', control: [{ kind: 'CONTROL_SEQUENCE_CORRID', data_type: 'TYPE_STRING' }] },
      ],
      state: [{ input_name: 'I', output_name: 'O', data_type: 'TYPE_FP32', dims: [-1] }],
    };
    expect(sequenceControlsOf(config(batcher))).toEqual({
      start: { name: 'S', datatype: 'FP32', falseValue: 0, trueValue: 1 },
      ready: { name: 'R', datatype: 'BOOL', falseValue: 0, trueValue: 1 },
      corrid: { name: 'C', datatype: 'BYTES' },
    });
    expect(sequenceStatesOf(config(batcher))).toEqual([{ inputName: 'I', outputName: 'O', datatype: 'FP32', dims: [-1] }]);
  });

  it('checks controls and states against the model, and leaves them out of auto-complete', () => {
    const io: ModelIO = {
      inputs: [
        { name: 'INPUT', datatype: 'INT32', dims: [-1, 1] },
        { name: 'START', datatype: 'INT32', dims: [-1, 1] },
        { name: 'S_IN', datatype: 'FP32', dims: [-1, 2] },
      ],
      outputs: [
        { name: 'OUTPUT', datatype: 'INT32', dims: [-1, 1] },
        { name: 'S_OUT', datatype: 'FP32', dims: [-1, 2] },
      ],
    };
    const batcher: ModelSequenceBatching = {
      ...start({ int32_false_true: [0, 1] }),
      state: [{ input_name: 'S_IN', output_name: 'S_OUT', data_type: 'TYPE_FP32', dims: [2] }],
    };
    const completed = autoCompleteModelConfig(config(batcher, { input: [], output: [] }), io, 'm');
    expect(completed.input.map((t) => t.name)).toEqual(['INPUT']);
    expect(completed.output.map((t) => t.name)).toEqual(['OUTPUT']);
    expect(completed.dynamic_batching).toBeUndefined();
    expect(() => validateSequenceBatching(config(batcher), io)).not.toThrow();
    const floatStart = { ...batcher, ...start({ fp32_false_true: [0, 1] }) };
    expect(() => validateSequenceBatching(config(floatStart), io)).toThrow(
      "model 'm': sequence batching control START 'START' is FP32 in the config, but the model's input is INT32",
    );
  });

  it("normalizes as Triton: a second of idle time, oldest's preferred batch size max_batch_size", () => {
    const normalized = normalizeModelConfig(config({ oldest: {} }), { visibleGpuIds: [] });
    expect(normalized.sequence_batching).toMatchObject({
      max_sequence_idle_microseconds: 1_000_000,
      oldest: { preferred_batch_size: [4] },
    });
  });
});
