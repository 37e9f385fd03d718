import { describe, expect, it } from 'vitest';
import { decodeInferRequest } from './infer-codec.ts';
import { wireContents } from '../../test-support/grpc-wire.ts';
import type { ModelInferRequestWire } from './wire-types.ts';

const request = (over: Partial<ModelInferRequestWire>): ModelInferRequestWire => ({
  model_name: 'm',
  model_version: '',
  id: '',
  parameters: {},
  inputs: [],
  outputs: [],
  raw_input_contents: [],
  ...over,
});

describe('decodeInferRequest', () => {
  it('raw inputs stay views on the message, in order', () => {
    const a = Buffer.from([1, 0, 0, 0]);
    const b = Buffer.from([2, 0, 0, 0]);
    const r = decodeInferRequest(
      request({
        id: 'r1',
        model_version: '3',
        inputs: [
          { name: 'A', datatype: 'INT32', shape: ['1'] },
          { name: 'B', datatype: 'INT32', shape: ['1'] },
        ],
        raw_input_contents: [a, b],
        outputs: [{ name: 'O', parameters: { classification: { parameter_choice: 'int64_param', int64_param: '2' } } }],
        parameters: { priority: { parameter_choice: 'uint64_param', uint64_param: '1' } },
      }),
    );
    expect(r).toMatchObject({ id: 'r1', modelName: 'm', modelVersion: '3', parameters: { priority: 1 } });
    expect(r.inputs[0]!.data).toBe(a);
    expect(r.inputs[1]!.data).toBe(b);
    expect(r.inputs[0]!.shape).toEqual([1]);
    expect(r.outputs).toEqual([{ name: 'O', parameters: { classification: 2 } }]);
  });

  it('an empty id is absent; the version is passed as sent (core reads empty as the version policy choosing)', () => {
    const r = decodeInferRequest(request({}));
    expect('id' in r).toBe(false);
    expect(r.modelVersion ?? '').toBe('');
  });

  it('typed contents become raw bytes', () => {
    const r = decodeInferRequest(
      request({ inputs: [{ name: 'A', datatype: 'FP32', shape: ['2'], contents: wireContents({ fp32_contents: [1, 2] }) }] }),
    );
    expect([...r.inputs[0]!.data]).toEqual([...new Uint8Array(Float32Array.of(1, 2).buffer)]);
  });

  it.each([
    [
      'raw for only some inputs',
      request({
        inputs: [
          { name: 'A', datatype: 'INT32', shape: ['1'] },
          { name: 'B', datatype: 'INT32', shape: ['1'] },
        ],
        raw_input_contents: [Buffer.alloc(4)],
      }),
      /raw_input_contents has 1 entries but the request has 2 inputs/,
    ],
    [
      'raw and contents together',
      request({
        inputs: [{ name: 'A', datatype: 'INT32', shape: ['1'], contents: wireContents({ int_contents: [1] }) }],
        raw_input_contents: [Buffer.alloc(4)],
      }),
      /input 'A' has contents while raw_input_contents is used/,
    ],
    [
      'an unknown datatype',
      request({ inputs: [{ name: 'A', datatype: 'FLOAT', shape: ['1'] }] }),
      "input 'A' has invalid datatype 'FLOAT'",
    ],
    [
      'no data',
      request({ inputs: [{ name: 'A', datatype: 'INT32', shape: ['2'] }] }),
      /input 'A' has no data: send it in raw_input_contents or in contents.int_contents/,
    ],
    [
      'a negative dimension',
      request({ inputs: [{ name: 'A', datatype: 'INT32', shape: ['-1'] }], raw_input_contents: [Buffer.alloc(0)] }),
      "tensor 'A' contains an invalid dimension [-1]",
    ],
    [
      // Triton's HTTP test payloads, over gRPC: the same checks and words as over HTTP.
      'an element count past INT64_MAX',
      request({ inputs: [{ name: 'A', datatype: 'FP32', shape: ['16', '1152921504606846978'] }] }),
      "invalid shape for input 'A': shape [16,1152921504606846978] causes total element count to exceed maximum size of 9223372036854775807",
    ],
    [
      'a byte size past INT64_MAX',
      request({ inputs: [{ name: 'A', datatype: 'FP32', shape: ['4', '1152921504606846978'] }] }),
      "byte size overflow for input 'A': element count (4611686018427387912) * data type size (4) exceeds maximum allowed size (9223372036854775807)",
    ],
  ])('rejects %s', (_what, msg, message) => {
    expect(() => decodeInferRequest(msg)).toThrow(message);
  });

  it('shared memory inputs take no raw_input_contents entry and need a byte size', () => {
    const shm = (region: string) => ({
      shared_memory_region: { parameter_choice: 'string_param' as const, string_param: region },
      shared_memory_byte_size: { parameter_choice: 'int64_param' as const, int64_param: '16' },
    });
    const raw = Uint8Array.of(1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0);
    const decoded = decodeInferRequest(
      request({
        inputs: [
          { name: 'A', datatype: 'INT32', shape: ['4'], parameters: shm('r') },
          { name: 'B', datatype: 'INT32', shape: ['4'] },
        ],
        raw_input_contents: [raw],
        outputs: [{ name: 'O', parameters: shm('o') }],
      }),
    );
    expect(decoded.inputs[0]).toMatchObject({ name: 'A', data: new Uint8Array(0), sharedMemory: { region: 'r', byteSize: 16, offset: 0 } });
    expect(decoded.inputs[1]).toMatchObject({ name: 'B', data: raw });
    expect(decoded.outputs![0]).toMatchObject({ name: 'O', sharedMemory: { region: 'o', byteSize: 16, offset: 0 } });
    const noSize = request({
      inputs: [
        {
          name: 'A',
          datatype: 'INT32',
          shape: ['0'],
          parameters: { shared_memory_region: { parameter_choice: 'string_param', string_param: 'r' } },
        },
      ],
    });
    expect(() => decodeInferRequest(noSize)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARG', message: "input 'A': shared_memory_region 'r' needs shared_memory_byte_size" }),
    );
  });
});
