import { describe, expect, it } from 'vitest';
import { InferenceServerError } from '../errors/errors.ts';
import { parseModelConfig, validateModelConfig, type ModelConfig, type ModelIO } from './index.ts';

const io: ModelIO = {
  inputs: [{ name: 'image', datatype: 'FP32', dims: [-1, 3, 224, -1] }],
  outputs: [{ name: 'probs', datatype: 'FP32', dims: [-1, 1000] }],
};

const valid = `
name: "resnet"
max_batch_size: 8
input [ { name: "image" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "probs" data_type: TYPE_FP32 dims: [ -1 ] } ]
dynamic_batching { preferred_batch_size: [ 4, 8 ] }
`;

function failure(config: ModelConfig, modelIO: ModelIO = io): string {
  try {
    validateModelConfig(config, modelIO);
  } catch (e) {
    expect(e).toBeInstanceOf(InferenceServerError);
    expect((e as InferenceServerError).code).toBe('INVALID_ARG');
    return (e as Error).message;
  }
  throw new Error('expected validateModelConfig to throw');
}

const edit = (extra: string, base = valid) => parseModelConfig(base + extra);
const replace = (from: string, to: string) => parseModelConfig(valid.replace(from, to));

describe('validateModelConfig', () => {
  it('accepts a config that agrees with the model', () => {
    expect(() => validateModelConfig(parseModelConfig(valid), io)).not.toThrow();
  });

  it('accepts max_batch_size 0 with the batch dim written into dims', () => {
    const c = parseModelConfig(`
      name: "m"
      input [ { name: "image" data_type: TYPE_FP32 dims: [ -1, 3, 224, 100 ] } ]
      output [ { name: "probs" data_type: TYPE_FP32 dims: [ 2, 1000 ] } ]`);
    expect(() => validateModelConfig(c, io)).not.toThrow();
  });

  it("refuses a decoupled model with the response cache, in Triton's words; either alone is fine", () => {
    const decoupled = 'model_transaction_policy { decoupled: true }\n';
    const cached = 'response_cache { enable: true }\n';
    expect(failure(edit(decoupled + cached))).toBe(
      "Response Cache does not currently support model resnet with 'decoupled' transaction policy. Please disable the response cache.",
    );
    expect(() => validateModelConfig(edit(decoupled), io)).not.toThrow();
    expect(() => validateModelConfig(edit(cached), io)).not.toThrow();
    expect(() => validateModelConfig(edit(decoupled + 'response_cache { enable: false }\n'), io)).not.toThrow();
  });

  it('rejects a config input the model does not have', () => {
    expect(failure(replace('name: "image"', 'name: "img"'))).toBe(
      "model 'resnet': input 'img' in the config is not an input of the model (model inputs: 'image')",
    );
  });

  it('rejects a config output the model does not have', () => {
    expect(failure(replace('name: "probs"', 'name: "logits"'))).toBe(
      "model 'resnet': output 'logits' in the config is not an output of the model (model outputs: 'probs')",
    );
  });

  it('rejects a data type that differs from the model', () => {
    expect(failure(replace('name: "probs" data_type: TYPE_FP32', 'name: "probs" data_type: TYPE_FP16'))).toBe(
      "model 'resnet': output 'probs' has data_type TYPE_FP16 (FP16) in the config, but the model's is FP32",
    );
  });

  it('rejects dims that differ from the model, naming both shapes', () => {
    expect(failure(replace('dims: [ 3, 224, 224 ]', 'dims: [ 3, 225, 224 ]'))).toBe(
      "model 'resnet': input 'image' has dims [3,225,224] in the config, but the model's shape is " +
        '[-1,3,224,-1] ([3,224,-1] without the batch dimension)',
    );
    expect(failure(replace('dims: [ 3, 224, 224 ]', 'dims: [ 3, 224 ]'))).toMatch(/input 'image' has dims \[3,224\]/);
  });

  it('lets -1 in the config match any model dim', () => {
    expect(() => validateModelConfig(replace('dims: [ 3, 224, 224 ]', 'dims: [ -1, -1, -1 ]'), io)).not.toThrow();
  });

  it('rejects max_batch_size > 0 when the model has a fixed first dim, and says so', () => {
    const fixed: ModelIO = { ...io, inputs: [{ name: 'image', datatype: 'FP32', dims: [1, 3, 224, 224] }] };
    expect(failure(parseModelConfig(valid), fixed)).toBe(
      "model 'resnet': max_batch_size is 8, but input 'image' of the model has shape [1,3,224,224] whose " +
        'first dimension is not variable (-1); batching needs a variable batch dimension: set max_batch_size: 0 ' +
        'or export the model with a dynamic first dimension',
    );
  });

  it('compares reshape.shape with the model and dims with reshape by element count', () => {
    const modelIO: ModelIO = {
      inputs: [
        { name: 'x', datatype: 'INT64', dims: [-1, 1, 16] },
        { name: 's', datatype: 'INT32', dims: [-1] },
      ],
      outputs: [{ name: 'y', datatype: 'FP32', dims: [-1, 2, -1, 6] }],
    };
    const config = (x: string, y: string) =>
      parseModelConfig(`
      name: "r" max_batch_size: 2
      input [ { name: "x" data_type: TYPE_INT64 ${x} }, { name: "s" data_type: TYPE_INT32 dims: [ 1 ] reshape { shape: [] } } ]
      output [ { name: "y" data_type: TYPE_FP32 ${y} } ]`);
    expect(() => validateModelConfig(config('dims: [ 16 ] reshape { shape: [ 1, 16 ] }', 'dims: [ 2, -1, 6 ]'), modelIO)).not.toThrow();
    expect(() =>
      validateModelConfig(
        config('dims: [ 4, 4 ] reshape { shape: [ 1, 16 ] }', 'dims: [ 2, -1, 1, 6 ] reshape { shape: [ 2, -1, 6 ] }'),
        modelIO,
      ),
    ).not.toThrow();
    expect(failure(config('dims: [ 15 ] reshape { shape: [ 1, 16 ] }', 'dims: [ 2, -1, 6 ]'), modelIO)).toBe(
      "model 'r': input 'x' has dims [15] and reshape [1,16] with different element counts",
    );
    expect(failure(config('dims: [ 16 ] reshape { shape: [ 16 ] }', 'dims: [ 2, -1, 6 ]'), modelIO)).toBe(
      "model 'r': input 'x' has reshape [16] in the config, but the model's shape is [-1,1,16] ([1,16] without the batch dimension)",
    );
    expect(failure(config('dims: [ 1, 16 ]', 'dims: [ 12, -1 ] reshape { shape: [ 2, -1, 6 ] }'), modelIO)).toMatch(
      /output 'y' has dims \[12,-1\] and reshape \[2,-1,6\] with different element counts/,
    );
  });

  it('requires every non-optional model input in the config', () => {
    const modelIO: ModelIO = {
      inputs: [
        ...io.inputs,
        { name: 'scale', datatype: 'FP32', dims: [-1, 1] },
        { name: 'bias', datatype: 'FP32', dims: [1], optional: true },
      ],
      outputs: io.outputs,
    };
    expect(failure(parseModelConfig(valid), modelIO)).toBe(
      "model 'resnet': input 'scale' of the model is missing from the config (every required model input must be listed)",
    );
  });

  it('requires data_type and dims on every tensor', () => {
    expect(failure(replace('name: "image" data_type: TYPE_FP32', 'name: "image"'))).toBe(
      "model 'resnet': input 'image' must specify data_type",
    );
    expect(failure(replace('dims: [ 3, 224, 224 ]', ''))).toMatch(/^model 'resnet': input 'image' must specify dims/);
    expect(failure(replace('dims: [ 3, 224, 224 ]', 'dims: [ 3, 0, 224 ]'))).toMatch(
      /input 'image' has dims \[3,0,224\]; each dim must be >= 1, or -1/,
    );
  });

  it('checks config sanity', () => {
    expect(failure(edit('input [ { name: "image" data_type: TYPE_FP32 dims: [ 1 ] } ]'))).toBe(
      "model 'resnet': input 'image' is listed more than once",
    );
    expect(failure(edit('output [ { name: "probs" data_type: TYPE_FP32 dims: [ 1 ] } ]'))).toBe(
      "model 'resnet': output 'probs' is listed more than once",
    );
    expect(failure(replace('max_batch_size: 8', 'max_batch_size: -1'))).toBe(
      "model 'resnet': max_batch_size must be a non-negative integer, got -1",
    );
    expect(failure(replace('max_batch_size: 8', 'max_batch_size: 0'))).toBe(
      "model 'resnet': dynamic_batching requires max_batch_size > 0 (a model with max_batch_size 0 cannot batch)",
    );
    expect(failure(replace('[ 4, 8 ]', '[ 4, 16 ]'))).toBe(
      "model 'resnet': dynamic_batching.preferred_batch_size 16 is outside 1..max_batch_size (8)",
    );
    expect(failure(replace('[ 4, 8 ]', '[ 0 ]'))).toMatch(/preferred_batch_size 0 is outside 1\.\.max_batch_size/);
    expect(failure(edit('instance_group [ { count: 1 }, { name: "g" count: -1 } ]'))).toBe(
      "model 'resnet': instance_group 'g' has count -1; count must be >= 1",
    );
    expect(failure(edit('instance_group { count: 0 }'))).toBe("model 'resnet': instance_group #0 has count 0; count must be >= 1");
  });

  it("checks an instance group's rate_limiter, naming the field", () => {
    const group = (limiter: string) => edit(`instance_group [ { name: "g" count: 1 rate_limiter { ${limiter} } } ]`);
    expect(() =>
      validateModelConfig(group('resources [ { name: "gpu" count: 2 }, { name: "lock" global: true count: 1 } ] priority: 2'), io),
    ).not.toThrow();
    expect(failure(group('resources [ { count: 1 } ]'))).toBe("model 'resnet': instance_group 'g' rate_limiter: resources #0 has no name");
    expect(failure(group('resources [ { name: "gpu" count: 1 }, { name: "gpu" count: 2 } ]'))).toBe(
      "model 'resnet': instance_group 'g' rate_limiter: resource 'gpu' is listed twice",
    );
  });

  it('checks priority levels', () => {
    const withPriorities = (body: string) => replace('dynamic_batching { preferred_batch_size: [ 4, 8 ] }', `dynamic_batching { ${body} }`);
    expect(() =>
      validateModelConfig(withPriorities('priority_levels: 3 default_priority_level: 3 priority_queue_policy { key: 1 value {} }'), io),
    ).not.toThrow();
    expect(failure(withPriorities('priority_levels: 3 default_priority_level: 4'))).toBe(
      "model 'resnet': dynamic_batching.default_priority_level 4 is outside 1..priority_levels (3)",
    );
    expect(failure(withPriorities('priority_levels: 3'))).toMatch(/default_priority_level 0 is outside 1\.\.priority_levels \(3\)/);
    expect(failure(withPriorities('priority_levels: 2 default_priority_level: 1 priority_queue_policy { key: 5 value {} }'))).toBe(
      "model 'resnet': dynamic_batching.priority_queue_policy has priority level 5, outside 1..priority_levels (2)",
    );
  });
});
