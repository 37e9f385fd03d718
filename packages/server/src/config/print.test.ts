import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InferenceServerError } from '../errors/errors.ts';
import { parseModelConfig, printModelConfig, type ModelConfig } from './index.ts';
import { arbitraryModelConfig } from '../../test-support/model-config-arbitrary.ts';

const base = { name: 'm', max_batch_size: 0, input: [], output: [] };

describe('printModelConfig', () => {
  it('writes canonical, readable pbtxt', () => {
    const config: ModelConfig = {
      name: 'resnet',
      platform: 'onnxruntime_onnx',
      max_batch_size: 8,
      input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [3, -1] }],
      output: [
        { name: 'y', data_type: 'TYPE_FP32', dims: [10], reshape: { shape: [] } },
        { name: 'z', data_type: 'TYPE_INT64', dims: [] },
      ],
      version_policy: { all: {} },
      dynamic_batching: { priority_queue_policy: { '2': { timeout_action: 'DELAY' } } },
      parameters: { threads: { string_value: 'say "hi"\n\\' } },
    };
    expect(printModelConfig(config)).toBe(`name: "resnet"
platform: "onnxruntime_onnx"
version_policy {
  all {}
}
max_batch_size: 8
input [
  {
    name: "x"
    data_type: TYPE_FP32
    dims: [ 3, -1 ]
  }
]
output [
  {
    name: "y"
    data_type: TYPE_FP32
    dims: [ 10 ]
    reshape {
      shape: []
    }
  },
  {
    name: "z"
    data_type: TYPE_INT64
    dims: []
  }
]
dynamic_batching {
  priority_queue_policy {
    key: 2
    value {
      timeout_action: DELAY
    }
  }
}
parameters {
  key: "threads"
  value {
    string_value: "say \\"hi\\"\\n\\\\"
  }
}
`);
  });

  it('round-trips hand-written cases, including odd strings and floats', () => {
    const cases: ModelConfig[] = [
      base,
      { ...base, name: '', input: [{ name: 'a', data_type: 'TYPE_STRING', dims: [1] }] },
      { ...base, name: 'tab\tnul\0bell\x07del\x7f é 😀 \'"' },
      { ...base, metric_tags: {}, cc_model_filenames: { __proto__: 'x', '': '' } },
      {
        ...base,
        sequence_batching: {
          direct: { minimum_slot_utilization: -0 },
          control_input: [{ control: [{ fp32_false_true: [NaN, Infinity, -Infinity, 1e-300, 5e-324, 1.7976931348623157e308, 0.1] }] }],
        },
      },
      { ...base, dynamic_batching: {} },
      { ...base, dynamic_batching: { priority_queue_policy: {}, preferred_batch_size: [] } },
      { ...base, model_warmup: [{ name: 'w', inputs: { x: { data_type: 'TYPE_FP32', dims: [1], random_data: true } } }] },
    ];
    for (const c of cases) expect(parseModelConfig(printModelConfig(c))).toEqual(c);
  });

  it('round-trips any config of the schema (fast-check)', () => {
    fc.assert(
      fc.property(arbitraryModelConfig(), (config) => {
        const text = printModelConfig(config);
        expect(parseModelConfig(text)).toEqual(config);
        expect(printModelConfig(parseModelConfig(text))).toBe(text);
      }),
      { numRuns: Number(process.env.FC_RUNS ?? 300) },
    );
  });

  it('rejects what it cannot print, naming the path', () => {
    const bad = (config: unknown) => {
      try {
        printModelConfig(config as ModelConfig);
      } catch (e) {
        expect(e).toBeInstanceOf(InferenceServerError);
        return (e as Error).message;
      }
      throw new Error('expected printModelConfig to throw');
    };
    expect(bad({ ...base, colour: 'red' })).toBe('cannot print model config: ModelConfig.colour: not a field of inference.ModelConfig');
    expect(bad({ ...base, input: [{ name: 'a', data_type: 'FP32' }] })).toMatch(
      /^cannot print model config: ModelConfig\.input\[0\]\.data_type: expected a value name of enum inference\.DataType/,
    );
    expect(bad({ ...base, max_batch_size: 1.5 })).toMatch(/ModelConfig\.max_batch_size: expected a safe integer/);
    expect(bad({ ...base, max_batch_size: 2 ** 31 })).toMatch(/out of range for int32/);
    expect(bad({ ...base, dynamic_batching: {}, sequence_batching: {} })).toMatch(/oneof 'scheduling_choice'/);
    expect(bad({ ...base, name: '\ud800' })).toMatch(/not well-formed Unicode/);
    expect(bad({ ...base, dynamic_batching: { priority_queue_policy: { x: {} } } })).toMatch(/expected an integer map key/);
  });
});
