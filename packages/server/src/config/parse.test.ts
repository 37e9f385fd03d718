import { describe, expect, it } from 'vitest';
import { InferenceServerError } from '../errors/errors.ts';
import { parseModelConfig } from './index.ts';

function parseError(text: string, fileName?: string): InferenceServerError {
  try {
    parseModelConfig(text, fileName);
  } catch (e) {
    expect(e).toBeInstanceOf(InferenceServerError);
    expect((e as InferenceServerError).code).toBe('INVALID_ARG');
    return e as InferenceServerError;
  }
  throw new Error(`expected a parse error for:\n${text}`);
}

describe('parseModelConfig: syntax', () => {
  it('gives the required fields defaults for an empty file', () => {
    expect(parseModelConfig('')).toEqual({ name: '', max_batch_size: 0, input: [], output: [] });
    expect(parseModelConfig('# only a comment\n\n')).toEqual({ name: '', max_batch_size: 0, input: [], output: [] });
  });

  it('reads nested messages with {} and <>, with or without ":"', () => {
    const braces = parseModelConfig('version_policy { specific { versions: 1 } }');
    const angles = parseModelConfig('version_policy: < specific: < versions: 1 > >');
    expect(braces.version_policy).toEqual({ specific: { versions: [1] } });
    expect(angles).toEqual(braces);
  });

  it('reads repeated fields as repeated entries, lists, and a mix of both', () => {
    const c = parseModelConfig(`
      input { name: "a" data_type: TYPE_FP32 dims: 1 dims: 2 }
      input [ { name: "b" data_type: TYPE_INT64 dims: [ 3, 4 ] }, < name: "c" > ]
      input: [ { name: "d" } ]
      output []
    `);
    expect(c.input.map((i) => i.name)).toEqual(['a', 'b', 'c', 'd']);
    expect(c.input[0]!.dims).toEqual([1, 2]);
    expect(c.input[1]!.dims).toEqual([3, 4]);
    expect(c.output).toEqual([]);
  });

  it('keeps an empty scalar list as an empty array', () => {
    expect(parseModelConfig('input { name: "a" dims: [] }').input[0]).toEqual({ name: 'a', dims: [] });
  });

  it('reads enums by name and by number', () => {
    const c = parseModelConfig('input { data_type: TYPE_FP16 format: 2 }');
    expect(c.input[0]).toEqual({ data_type: 'TYPE_FP16', format: 'FORMAT_NCHW' });
  });

  it('decodes string escapes in both quote styles', () => {
    const c = parseModelConfig(String.raw`
      name: "a\nb\tc\\d\'e\"f"
      platform: 'q\'\"\101\x42\x4a\7\r'
      backend: "\u00e9\U0001F600\ud83d\ude00\?\a\b\f\v"
    `);
    expect(c.name).toBe('a\nb\tc\\d\'e"f');
    expect(c.platform).toBe('q\'"ABJ\x07\r');
    expect(c.backend).toBe('é😀😀?\x07\b\f\v');
  });

  it('decodes octal and hex escapes as UTF-8 bytes, and raw non-ASCII text', () => {
    expect(parseModelConfig(String.raw`name: "\303\251\xc3\xa9"`).name).toBe('éé');
    expect(parseModelConfig('name: "日本語 ✓"').name).toBe('日本語 ✓');
  });

  it('concatenates adjacent strings, across lines and quote styles', () => {
    expect(parseModelConfig(`name: "ab" 'cd'\n  "ef"`).name).toBe('abcdef');
  });

  it('ignores # comments, also inside messages and after values', () => {
    const c = parseModelConfig(`
      # leading
      name: "m" # trailing
      input { # opening
        name: "#not a comment" # closing
      }
    `);
    expect(c.name).toBe('m');
    expect(c.input[0]!.name).toBe('#not a comment');
  });

  it('reads maps as { key value } entries, in every spelling, keyed by string or number', () => {
    const c = parseModelConfig(`
      parameters { key: "a" value: { string_value: "1" } }
      parameters: { key: "b", value < string_value: "2" > }
      parameters [ { key: "c" value { string_value: "3" } }, { value { string_value: "4" } key: "d" } ]
      dynamic_batching {
        priority_levels: 3
        priority_queue_policy { key: 1 value: { max_queue_size: 5 } }
        priority_queue_policy { key: 3 value: { timeout_action: DELAY } }
      }
      metric_tags { key: "k" value: "v" }
    `);
    expect(c.parameters).toEqual({
      a: { string_value: '1' },
      b: { string_value: '2' },
      c: { string_value: '3' },
      d: { string_value: '4' },
    });
    expect(c.dynamic_batching!.priority_queue_policy).toEqual({
      '1': { max_queue_size: 5 },
      '3': { timeout_action: 'DELAY' },
    });
    expect(c.metric_tags).toEqual({ k: 'v' });
  });

  it('fills a missing map key or value with its default', () => {
    const c = parseModelConfig('metric_tags { key: "k" } parameters { value { string_value: "x" } } parameters { key: "e" }');
    expect(c.metric_tags).toEqual({ k: '' });
    expect(c.parameters).toEqual({ '': { string_value: 'x' }, e: {} });
  });

  it('stores a map key __proto__ as an ordinary key', () => {
    const c = parseModelConfig('metric_tags { key: "__proto__" value: "x" }');
    expect(Object.keys(c.metric_tags as object)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(c.metric_tags)).toBe(Object.prototype);
  });

  it('reads signed integers in decimal, hex and octal', () => {
    const c = parseModelConfig('input { dims: [ -1, 0x10, 010, 0, - 7, 9007199254740991 ] }');
    expect(c.input[0]!.dims).toEqual([-1, 16, 8, 0, -7, Number.MAX_SAFE_INTEGER]);
  });

  it('reads floats with exponents, inf, nan, f suffix and integers', () => {
    const c = parseModelConfig(`
      sequence_batching {
        control_input { control { fp32_false_true: [ 1.5, -2e3, .5, 1.e-2, 3f, 2.5F, 7, -0x10 ] } }
        control_input { control { fp32_false_true: [ inf, -inf, Infinity, -INF, nan, -NaN, -0.0 ] } }
      }
    `);
    const [a, b] = (c.sequence_batching as { control_input: { control: { fp32_false_true: number[] }[] }[] }).control_input.map(
      (x) => x.control[0]!.fp32_false_true,
    );
    expect(a).toEqual([1.5, -2000, 0.5, 0.01, 3, 2.5, 7, -16]);
    expect(b!.slice(0, 4)).toEqual([Infinity, -Infinity, Infinity, -Infinity]);
    expect(b![4]).toBeNaN();
    expect(b![5]).toBeNaN();
    expect(Object.is(b![6], -0)).toBe(true);
  });

  it('reads booleans in every spelling', () => {
    const c = parseModelConfig(`
      sequence_batching { control_input { control {
        bool_false_true: [ true, false, True, False, t, f, 1, 0 ]
      } } }
      response_cache { enable: t }
    `);
    expect((c.sequence_batching as any).control_input[0].control[0].bool_false_true).toEqual([
      true,
      false,
      true,
      false,
      true,
      false,
      true,
      false,
    ]);
    expect(c.response_cache).toEqual({ enable: true });
  });

  it('accepts CRLF line ends and a byte order mark', () => {
    expect(parseModelConfig('\ufeffname: "m"\r\nmax_batch_size: 2\r\n')).toMatchObject({ name: 'm', max_batch_size: 2 });
    expect(() => parseModelConfig('\ufeffname: "m"\r\n  bad: 1')).toThrow(/^config\.pbtxt:2:3: unknown field 'bad'/);
  });

  it('accepts commas and semicolons as optional separators', () => {
    const c = parseModelConfig('name: "m", max_batch_size: 2; input { name: "a"; dims: [1], };');
    expect(c).toMatchObject({ name: 'm', max_batch_size: 2, input: [{ name: 'a', dims: [1] }] });
  });

  it('converts int64 and uint64 to numbers', () => {
    const c = parseModelConfig(`
      version_policy { specific { versions: [ 1, 3 ] } }
      ensemble_scheduling { step { model_name: "x" model_version: -1 } }
      instance_group { secondary_devices { kind: KIND_NVDLA device_id: 9007199254740991 } }
    `);
    expect(c.version_policy).toEqual({ specific: { versions: [1, 3] } });
    expect((c.ensemble_scheduling as any).step[0].model_version).toBe(-1);
    expect(c.instance_group![0]!.secondary_devices).toEqual([{ kind: 'KIND_NVDLA', device_id: Number.MAX_SAFE_INTEGER }]);
    const d = parseModelConfig('dynamic_batching { max_queue_delay_microseconds: 0x7fffffff priority_levels: 2 }');
    expect(d.dynamic_batching).toEqual({ max_queue_delay_microseconds: 2147483647, priority_levels: 2 });
  });
});

describe('parseModelConfig: errors name file, line and column', () => {
  it('a missing ":" or "{" after a field name', () => {
    const e = parseError('name: "m"\ninput {\n  name: "x"\n  dims 3\n}\n');
    expect(e.message).toBe("config.pbtxt:4:8: expected ':' or '{' after field name 'dims', found '3'");
  });

  it('uses the given file name', () => {
    expect(parseError('max_batch_size 8', 'models/resnet/config.pbtxt').message).toBe(
      "models/resnet/config.pbtxt:1:16: expected ':' or '{' after field name 'max_batch_size', found '8'",
    );
  });

  it('an unknown field, with its message type and a suggestion', () => {
    const e = parseError('input [\n  {\n    name: "x"\n    dimz: [ 1 ]\n  }\n]');
    expect(e.message).toBe("config.pbtxt:4:5: unknown field 'dimz' in inference.ModelInput (did you mean 'dims'?)");
    expect(parseError('\n\n  foo: 1').message).toBe("config.pbtxt:3:3: unknown field 'foo' in inference.ModelConfig");
  });

  it('a string where an integer belongs', () => {
    expect(parseError('max_batch_size: "8"').message).toBe(
      "config.pbtxt:1:17: expected an integer (int32) for field 'max_batch_size' of inference.ModelConfig, found a string",
    );
  });

  it('a float where an integer belongs, and an integer out of range', () => {
    expect(parseError('max_batch_size: 1.5').message).toMatch(/^config\.pbtxt:1:17: expected an integer \(int32\)/);
    expect(parseError('max_batch_size: 2147483648').message).toBe(
      "config.pbtxt:1:17: value 2147483648 is out of range for int32 field 'max_batch_size' of inference.ModelConfig",
    );
    expect(parseError('dynamic_batching { max_queue_delay_microseconds: -1 }').message).toMatch(
      /^config\.pbtxt:1:50: value -1 is out of range for uint64/,
    );
  });

  it('an int64 beyond Number.MAX_SAFE_INTEGER', () => {
    expect(parseError('input {\n dims: [ 9007199254740992 ] }').message).toBe(
      "config.pbtxt:2:10: value 9007199254740992 of field 'dims' of inference.ModelInput is beyond " +
        'Number.MAX_SAFE_INTEGER (9007199254740991) and cannot be represented exactly',
    );
  });

  it('an unknown enum name', () => {
    expect(parseError('input { data_type: TYPE_FLOAT32 }').message).toMatch(
      /^config\.pbtxt:1:20: unknown value 'TYPE_FLOAT32' for enum field 'data_type' of inference\.ModelInput; expected one of TYPE_INVALID, TYPE_BOOL/,
    );
    expect(parseError('instance_group { kind: 9 }').message).toBe(
      "config.pbtxt:1:24: unknown number 9 for enum field 'kind' of inference.ModelInstanceGroup",
    );
  });

  it('a singular field set twice', () => {
    expect(parseError('name: "a"\nname: "b"').message).toBe(
      "config.pbtxt:2:1: field 'name' of inference.ModelConfig is set more than once (first at 1:1)",
    );
    expect(parseError('optimization { graph { level: 1 } graph { level: 2 } }').message).toBe(
      "config.pbtxt:1:35: field 'graph' of inference.ModelOptimizationPolicy is set more than once (first at 1:16)",
    );
  });

  it('two members of one oneof', () => {
    expect(parseError('dynamic_batching {}\nsequence_batching {}').message).toBe(
      "config.pbtxt:2:1: field 'sequence_batching' of inference.ModelConfig is set along with 'dynamic_batching'; both belong to oneof 'scheduling_choice'",
    );
  });

  it('a list for a singular field, a message for a scalar, a scalar for a message', () => {
    expect(parseError('name: [ "a" ]').message).toBe(
      "config.pbtxt:1:7: field 'name' of inference.ModelConfig is not repeated; a list [...] is not allowed",
    );
    expect(parseError('name { }').message).toBe("config.pbtxt:1:6: field 'name' of inference.ModelConfig is a string, not a message");
    expect(parseError('version_policy: 3').message).toBe(
      "config.pbtxt:1:17: expected '{' for message field 'version_policy' of inference.ModelConfig",
    );
  });

  it('a scalar list without ":"', () => {
    expect(parseError('input { dims [ 1 ] }').message).toBe("config.pbtxt:1:14: expected ':' after field name 'dims'");
  });

  it('bad map entries', () => {
    expect(parseError('parameters { name: "a" }').message).toMatch(
      /^config\.pbtxt:1:14: unknown field 'name' in an entry of map field 'parameters' of inference\.ModelConfig; expected 'key' or 'value'/,
    );
    expect(parseError('parameters { key: "a" key: "b" }').message).toMatch(/^config\.pbtxt:1:23: 'key' is set more than once/);
    expect(parseError('dynamic_batching { priority_queue_policy { key: "x" } }').message).toMatch(
      /^config\.pbtxt:1:49: expected an integer \(uint64\) for field 'priority_queue_policy\.key'/,
    );
    expect(parseError('metric_tags: "x"').message).toMatch(/^config\.pbtxt:1:14: expected '\{ key: \.\.\. value: \.\.\. \}'/);
  });

  it('unterminated messages, lists and strings', () => {
    expect(parseError('input {\n  name: "a"\n').message).toBe(
      "config.pbtxt:3:1: expected '}' to close the message opened at 1:7, found end of file",
    );
    expect(parseError('input { dims: [ 1, 2 }').message).toBe(
      "config.pbtxt:1:22: expected ',' or ']' in the list of field 'dims', found '}'",
    );
    expect(parseError('name: "abc\n"').message).toBe('config.pbtxt:1:7: unterminated string literal');
    expect(parseError('}').message).toBe("config.pbtxt:1:1: expected a field name, found '}'");
    expect(parseError('name:').message).toBe("config.pbtxt:1:6: expected a value for field 'name', found end of file");
  });

  it('lexical errors', () => {
    expect(parseError('name: "a\\qb"').message).toBe("config.pbtxt:1:9: invalid escape sequence '\\q'");
    expect(parseError('name: "\\400"').message).toMatch(/^config\.pbtxt:1:8: octal escape '\\400' is above \\377/);
    expect(parseError('name: "\\xff"').message).toBe("config.pbtxt:1:7: string value of field 'name' is not valid UTF-8");
    expect(parseError('max_batch_size: 08').message).toBe("config.pbtxt:1:17: invalid octal number '08'");
    expect(parseError('max_batch_size: 8a').message).toBe('config.pbtxt:1:18: a number must be followed by a space or a symbol');
    expect(parseError('max_batch_size: 1e').message).toBe('config.pbtxt:1:19: expected digits in exponent');
    expect(parseError('\n  name: @').message).toBe('config.pbtxt:2:9: unexpected character "@"');
    expect(parseError('[ext.field]: 1').message).toBe('config.pbtxt:1:1: extension and Any fields ([...]) are not supported');
  });

  it('deep nesting is an error, not a stack overflow', () => {
    expect(parseError('a {'.repeat(100_000)).message).toMatch(/^config\.pbtxt:1:303: messages nested deeper than 100 levels/);
  });
});

describe('parseModelConfig: realistic Triton configs', () => {
  it('a vision model with dynamic batching, priorities, GPU groups and accelerators', () => {
    const c = parseModelConfig(`
name: "densenet_onnx"
platform: "onnxruntime_onnx"
max_batch_size : 32
version_policy: { specific: { versions: [1, 3] } }
input [
  {
    name: "data_0"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
    reshape: { shape: [ 1, 3, 224, 224 ] }
  }
]
output [
  {
    name: "fc6_1"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    reshape: { shape: [ 1, 1000, 1, 1 ] }
    label_filename: "densenet_labels.txt"
  }
]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
  priority_levels: 2
  default_priority_level: 2
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 50000 }
  priority_queue_policy {
    key: 1
    value: {
      timeout_action: DELAY
      default_timeout_microseconds: 100000
      allow_timeout_override: true
      max_queue_size: 10
    }
  }
}
instance_group [
  {
    count: 2
    kind: KIND_GPU
    gpus: [ 0 ]
  },
  {
    count: 1
    kind: KIND_GPU
    gpus: [ 1, 2 ]
  }
]
optimization { execution_accelerators {
  gpu_execution_accelerator : [ {
    name : "tensorrt"
    parameters { key: "precision_mode" value: "FP16" }
    parameters { key: "max_workspace_size_bytes" value: "1073741824" }
  } ]
}}
model_warmup [
  {
    name: "zero_warmup"
    batch_size: 8
    inputs {
      key: "data_0"
      value: {
        data_type: TYPE_FP32
        dims: [ 3, 224, 224 ]
        zero_data: true
      }
    }
  }
]
parameters { key: "intra_op_thread_count" value: { string_value: "2" } }
parameters: { key: "cudnn_conv_algo_search" value: { string_value: "1" } }
`);
    expect(c).toEqual({
      name: 'densenet_onnx',
      platform: 'onnxruntime_onnx',
      max_batch_size: 32,
      version_policy: { specific: { versions: [1, 3] } },
      input: [
        {
          name: 'data_0',
          data_type: 'TYPE_FP32',
          format: 'FORMAT_NCHW',
          dims: [3, 224, 224],
          reshape: { shape: [1, 3, 224, 224] },
        },
      ],
      output: [
        {
          name: 'fc6_1',
          data_type: 'TYPE_FP32',
          dims: [1000],
          reshape: { shape: [1, 1000, 1, 1] },
          label_filename: 'densenet_labels.txt',
        },
      ],
      dynamic_batching: {
        preferred_batch_size: [4, 8],
        max_queue_delay_microseconds: 100,
        priority_levels: 2,
        default_priority_level: 2,
        default_queue_policy: { timeout_action: 'REJECT', default_timeout_microseconds: 50000 },
        priority_queue_policy: {
          '1': { timeout_action: 'DELAY', default_timeout_microseconds: 100000, allow_timeout_override: true, max_queue_size: 10 },
        },
      },
      instance_group: [
        { count: 2, kind: 'KIND_GPU', gpus: [0] },
        { count: 1, kind: 'KIND_GPU', gpus: [1, 2] },
      ],
      optimization: {
        execution_accelerators: {
          gpu_execution_accelerator: [
            {
              name: 'tensorrt',
              parameters: { precision_mode: 'FP16', max_workspace_size_bytes: '1073741824' },
            },
          ],
        },
      },
      model_warmup: [
        {
          name: 'zero_warmup',
          batch_size: 8,
          inputs: { data_0: { data_type: 'TYPE_FP32', dims: [3, 224, 224], zero_data: true } },
        },
      ],
      parameters: {
        intra_op_thread_count: { string_value: '2' },
        cudnn_conv_algo_search: { string_value: '1' },
      },
    });
  });

  it('an ensemble with input_map and output_map', () => {
    const c = parseModelConfig(`
name: "ensemble_model"
platform: "ensemble"
max_batch_size: 1
input [ { name: "IMAGE" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "CLASSIFICATION" data_type: TYPE_FP32 dims: [ 1000 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "image_preprocess_model"
      model_version: -1
      input_map { key: "RAW_IMAGE" value: "IMAGE" }
      output_map { key: "PREPROCESSED_OUTPUT" value: "preprocessed_image" }
    },
    {
      model_name: "classification_model"
      model_version: -1
      input_map { key: "FORMATTED_IMAGE" value: "preprocessed_image" }
      output_map { key: "CLASSIFICATION_OUTPUT" value: "CLASSIFICATION" }
    }
  ]
}
`);
    expect(c.ensemble_scheduling).toEqual({
      step: [
        {
          model_name: 'image_preprocess_model',
          model_version: -1,
          input_map: { RAW_IMAGE: 'IMAGE' },
          output_map: { PREPROCESSED_OUTPUT: 'preprocessed_image' },
        },
        {
          model_name: 'classification_model',
          model_version: -1,
          input_map: { FORMATTED_IMAGE: 'preprocessed_image' },
          output_map: { CLASSIFICATION_OUTPUT: 'CLASSIFICATION' },
        },
      ],
    });
  });

  it('a sequence model with control inputs, state and the oldest strategy', () => {
    const c = parseModelConfig(`
name: "seq"
backend: "onnxruntime"
max_batch_size: 8
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2 ] }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
  state [ {
    input_name: "INPUT_STATE" output_name: "OUTPUT_STATE" data_type: TYPE_INT32 dims: [ -1 ]
    initial_state: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true name: "initial" }
  } ]
}
instance_group [ { kind: KIND_CPU count: 1 } ]
model_transaction_policy { decoupled: false }
`);
    expect(c.sequence_batching).toEqual({
      max_sequence_idle_microseconds: 5000000,
      oldest: { max_candidate_sequences: 4, preferred_batch_size: [2] },
      control_input: [
        { name: 'START', control: [{ kind: 'CONTROL_SEQUENCE_START', int32_false_true: [0, 1] }] },
        { name: 'CORRID', control: [{ kind: 'CONTROL_SEQUENCE_CORRID', data_type: 'TYPE_UINT64' }] },
      ],
      state: [
        {
          input_name: 'INPUT_STATE',
          output_name: 'OUTPUT_STATE',
          data_type: 'TYPE_INT32',
          dims: [-1],
          initial_state: [{ data_type: 'TYPE_INT32', dims: [1], zero_data: true, name: 'initial' }],
        },
      ],
    });
    expect(c.model_transaction_policy).toEqual({ decoupled: false });
  });
});
