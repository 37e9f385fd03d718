import { describe, expect, it } from 'vitest';
import { modelConfigFromProtobufJson } from './from-json.ts';

describe('modelConfigFromProtobufJson', () => {
  it('takes lowerCamelCase names, int64 as strings and enums by number, as protobuf JSON does', () => {
    const config = modelConfigFromProtobufJson({
      maxBatchSize: '4',
      input: [{ name: 'INPUT0', dataType: 'TYPE_FP32', dims: ['4', -1] }],
      output: [{ name: 'OUTPUT0', data_type: 11, dims: [4] }],
      dynamicBatching: { maxQueueDelayMicroseconds: '100', preferredBatchSize: [2, '4'] },
      instanceGroup: [{ kind: 'KIND_CPU', count: 2 }],
      parameters: { someKey: { stringValue: 'x' } },
    });
    expect(config).toEqual({
      max_batch_size: 4,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [4, -1] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [4] }],
      dynamic_batching: { max_queue_delay_microseconds: 100, preferred_batch_size: [2, 4] },
      instance_group: [{ kind: 'KIND_CPU', count: 2 }],
      // Map keys are the user's own: never renamed.
      parameters: { someKey: { string_value: 'x' } },
    });
  });

  it('refuses a name the schema does not know, naming where it is', () => {
    expect(() => modelConfigFromProtobufJson({ input: [{ name: 'I', dataTipe: 'TYPE_FP32' }] })).toThrow(
      /config field 'input\[0\]\.dataTipe' is not a field of ModelInput/,
    );
  });
});
