import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { parseModelConfig } from './index.ts';
import { modelConfigRoot } from './schema.ts';
import { modelConfigToJson } from './to-json.ts';

describe('modelConfigToJson (the HTTP /config document, as Triton prints it)', () => {
  it('prints every primitive field of each present message, enums by name, 64-bit integers as numbers', () => {
    const config = parseModelConfig(`
      name: "resnet"
      backend: "onnxruntime"
      max_batch_size: 8
      input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, -1 ] reshape { shape: [ -1, 3 ] } } ]
      output [ { name: "y" data_type: TYPE_INT64 dims: [ 10 ] } ]
      version_policy { specific { versions: [ 1, 3 ] } }
      instance_group [ { kind: KIND_GPU count: 2 gpus: [ 0, 1 ] secondary_devices [ { device_id: 7 } ] } ]
      dynamic_batching { max_queue_delay_microseconds: 100 priority_queue_policy { key: 2 value: { timeout_action: DELAY } } }
      parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
      response_cache {}
      model_transaction_policy {}
    `);
    expect(modelConfigToJson(config)).toEqual({
      name: 'resnet',
      platform: '',
      backend: 'onnxruntime',
      runtime: '',
      version_policy: { specific: { versions: [1, 3] } },
      max_batch_size: 8,
      input: [
        {
          name: 'x',
          data_type: 'TYPE_FP32',
          format: 'FORMAT_NONE',
          dims: [3, -1],
          reshape: { shape: [-1, 3] },
          is_shape_tensor: false,
          allow_ragged_batch: false,
          optional: false,
          is_non_linear_format_io: false,
        },
      ],
      output: [
        {
          name: 'y',
          data_type: 'TYPE_INT64',
          dims: [10],
          label_filename: '',
          is_shape_tensor: false,
          is_non_linear_format_io: false,
        },
      ],
      batch_input: [],
      batch_output: [],
      dynamic_batching: {
        preferred_batch_size: [],
        max_queue_delay_microseconds: 100,
        preserve_ordering: false,
        priority_levels: 0,
        default_priority_level: 0,
        priority_queue_policy: {
          '2': { timeout_action: 'DELAY', default_timeout_microseconds: 0, allow_timeout_override: false, max_queue_size: 0 },
        },
      },
      instance_group: [
        {
          name: '',
          kind: 'KIND_GPU',
          count: 2,
          gpus: [0, 1],
          // Triton leaves this int64 as protobuf's string.
          secondary_devices: [{ kind: 'KIND_NVDLA', device_id: '7' }],
          profile: [],
          passive: false,
          host_policy: '',
        },
      ],
      default_model_filename: '',
      cc_model_filenames: {},
      metric_tags: {},
      parameters: { intra_op_thread_count: { string_value: '1' } },
      model_warmup: [],
      model_transaction_policy: { decoupled: false },
      response_cache: { enable: false },
    });
  });

  it('leaves out absent messages and unset oneof members', () => {
    const json = modelConfigToJson(parseModelConfig('name: "m"'));
    for (const key of ['version_policy', 'optimization', 'dynamic_batching', 'sequence_batching', 'response_cache']) {
      expect(json).not.toHaveProperty(key);
    }
    expect(json).toMatchObject({ name: 'm', max_batch_size: 0, input: [], output: [], instance_group: [] });
  });

  it('names only 64-bit fields that exist in the schema as kept-as-string', () => {
    const root = modelConfigRoot();
    for (const path of [
      'inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.dim',
      'inference.ModelInstanceGroup.SecondaryDevice.device_id',
      'inference.ModelSequenceBatching.InitialState.dims',
    ]) {
      const type = root.lookupType(path.slice(0, path.lastIndexOf('.')));
      const field = type.fields[path.slice(path.lastIndexOf('.') + 1)];
      expect(field, path).toBeInstanceOf(protobuf.Field);
      expect(['int64', 'uint64']).toContain(field!.type);
    }
    const json = modelConfigToJson(
      parseModelConfig(`name: "s" sequence_batching { state [ { dims: [ 4 ] initial_state [ { dims: [ 4 ] zero_data: true } ] } ] }`),
    );
    expect((json['sequence_batching'] as any).state[0]).toMatchObject({ dims: [4], initial_state: [{ dims: ['4'], zero_data: true }] });
  });
});
