import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { InferenceRequest, InferenceResponse } from '../core/index.ts';
import { InferenceServerError } from '../errors/errors.ts';
import { DATATYPES } from '../tensor/datatype.ts';
import { parseRequestJson } from '../tensor/json-text.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { SAMPLES } from '../../test-support/tensor-samples.ts';
import { decodeHttpInferRequest, encodeHttpInferResponse, type EncodedHttpResponse } from './infer-codec.ts';

/** A request body as a Triton client builds it: JSON, then the binary inputs in order. */
function binaryBody(json: unknown, ...binary: Uint8Array[]): [Buffer, string] {
  const header = Buffer.from(JSON.stringify(json));
  return [Buffer.concat([header, ...binary]), String(header.length)];
}

function decode(body: Buffer | string, headerLength?: string): InferenceRequest {
  return decodeHttpInferRequest(typeof body === 'string' ? Buffer.from(body) : body, headerLength, 'm', undefined);
}

function failure(f: () => unknown): InferenceServerError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(InferenceServerError);
    return e as InferenceServerError;
  }
  throw new Error('expected an error');
}

/** Splits an encoded response as a client would: JSON header, then each binary output. */
function split(encoded: EncodedHttpResponse): { json: any; binary: Map<string, Buffer> } {
  const all = Buffer.concat(encoded.chunks);
  const jsonLength = encoded.headerLength ?? all.length;
  const text = all.subarray(0, jsonLength).toString();
  // FP32/FP64 outputs may carry NaN and Infinity tokens, as Triton writes them (kWriteNanAndInfFlag): read those as its clients do.
  const json = /\b(NaN|Infinity)\b/.test(text) ? parseRequestJson(text) : JSON.parse(text);
  const binary = new Map<string, Buffer>();
  let offset = jsonLength;
  for (const o of json.outputs) {
    const size = o.parameters?.binary_data_size;
    if (size === undefined) continue;
    binary.set(o.name, all.subarray(offset, offset + size));
    offset += size;
  }
  expect(offset).toBe(all.length);
  return { json, binary };
}

const int32Input = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  datatype: 'INT32',
  shape: [1, 4],
  data: [1, 2, 3, 4],
  ...extra,
});

describe('decodeHttpInferRequest', () => {
  it('decodes a JSON request, keeping id, parameters and requested outputs', () => {
    const request = decodeHttpInferRequest(
      Buffer.from(
        JSON.stringify({
          id: 'req-1',
          parameters: { priority: 2, timeout: 5000, binary_data_output: true, tag: 'x' },
          inputs: [int32Input('INPUT0')],
          outputs: [{ name: 'OUTPUT0', parameters: { binary_data: false } }, { name: 'OUTPUT1' }],
        }),
      ),
      undefined,
      'simple',
      '3',
    );
    expect(request).toMatchObject({
      id: 'req-1',
      modelName: 'simple',
      modelVersion: '3',
      parameters: { priority: 2, timeout: 5000, binary_data_output: true, tag: 'x' },
      outputs: [
        { name: 'OUTPUT0', parameters: { binary_data: false } },
        { name: 'OUTPUT1', parameters: {} },
      ],
    });
    expect(request.inputs[0]).toMatchObject({ name: 'INPUT0', datatype: 'INT32', shape: [1, 4] });
    expect([...new Int32Array(request.inputs[0]!.data.slice().buffer)]).toEqual([1, 2, 3, 4]);
  });

  it('leaves id, version and outputs out when absent', () => {
    const request = decode(JSON.stringify({ inputs: [int32Input('A')] }));
    expect('id' in request).toBe(false);
    expect('modelVersion' in request).toBe(false);
    expect(request.outputs).toBeUndefined();
    expect(request.parameters).toEqual({});
  });

  it('takes binary inputs in order as views on the body, between JSON inputs', () => {
    const a = new Uint8Array(new Float32Array([1, 2, 3]).buffer);
    const b = new Uint8Array(new Int16Array([-1, 7]).buffer);
    const [body, headerLength] = binaryBody(
      {
        inputs: [
          { name: 'A', datatype: 'FP32', shape: [3], parameters: { binary_data_size: 12 } },
          int32Input('J'),
          { name: 'B', datatype: 'INT16', shape: [1, 2], parameters: { binary_data_size: 4 } },
          { name: 'E', datatype: 'FP64', shape: [0], parameters: { binary_data_size: 0 } },
        ],
      },
      a,
      b,
    );
    const request = decode(body, headerLength);
    const [A, J, B, E] = request.inputs;
    expect(A!.data).toEqual(a);
    expect(B!.data).toEqual(b);
    expect(E!.data.byteLength).toBe(0);
    expect(A!.data.buffer).toBe(body.buffer);
    expect(B!.data.buffer).toBe(body.buffer);
    expect(B!.data.byteOffset).toBe(body.byteOffset + Number(headerLength) + 12);
    expect(J!.data.buffer).not.toBe(body.buffer);
  });

  it('accepts a header length equal to the body length (no binary part) and with surrounding spaces', () => {
    const json = JSON.stringify({ inputs: [int32Input('A')] });
    expect(decode(json, String(json.length)).inputs).toHaveLength(1);
    expect(decode(json, ` ${json.length} `).inputs).toHaveLength(1);
  });

  it('survives a body nested 100k levels deep', () => {
    const deep = '['.repeat(100_000) + '1' + ']'.repeat(100_000);
    const e = failure(() => decode(`{"inputs":[{"name":"DEEP","datatype":"INT32","shape":[1],"data":${deep}}]}`));
    expect(e.code).toBe('INVALID_ARG');
    expect(e.message).toBe(
      "JSON nesting depth exceeds maximum allowed limit (100): the data of input 'DEEP' is nested more than 97 levels deep",
    );
  });

  it('takes a header length of 0 as a raw binary request: the body is the one input, every output binary', () => {
    const body = Buffer.from(Float32Array.from([1, 2, 3]).buffer);
    const request = decodeHttpInferRequest(body, '0', 'm', '2');
    expect(request).toMatchObject({ modelName: 'm', modelVersion: '2', inputs: [], parameters: { binary_data_output: true } });
    expect(request.rawInput?.buffer).toBe(body.buffer);
    expect(request.rawInput?.byteLength).toBe(12);
    expect(decodeHttpInferRequest(Buffer.alloc(0), '0', 'm', undefined).rawInput?.byteLength).toBe(0);
  });

  const cases: [string, () => unknown, RegExp, string?][] = [
    [
      'a header length that is not a number',
      () => decode('{}', 'abc'),
      /Inference-Header-Content-Length \("abc"\) must be a non-negative integer/,
    ],
    ['a negative header length', () => decode('{}', '-1'), /Inference-Header-Content-Length \("-1"\)/],
    ['a fractional header length', () => decode('{}', '1.5'), /Inference-Header-Content-Length/],
    ['an empty header length', () => decode('{}', ''), /Inference-Header-Content-Length/],
    [
      'a header length beyond the body',
      () => decode('{"inputs":[]}', '100000'),
      /Inference-Header-Content-Length \("100000"\).*no larger than the body \(13 bytes\)/,
    ],
    ['truncated JSON', () => decode('{"inputs":[{"name":"A"'), /failed to parse the request JSON buffer: .+/],
    ['an empty body', () => decode(''), /failed to parse the request JSON buffer/],
    ['JSON cut by the header length', () => decode('{"inputs":[]}', '5'), /failed to parse the request JSON buffer/],
    ['a body that is an array', () => decode('[]'), /request JSON must be an object, got an array/],
    ['a body that is null', () => decode('null'), /request JSON must be an object, got null/],
    ['missing inputs', () => decode('{}'), /'inputs' array/],
    ['inputs not an array', () => decode('{"inputs":{}}'), /'inputs' array/],
    ['an input that is not an object', () => decode('{"inputs":[3]}'), /input 0 must be a JSON object, got 3/],
    [
      'an input without a name',
      () => decode(JSON.stringify({ inputs: [{ ...int32Input('A'), name: undefined }] })),
      /input 0 must have a non-empty string 'name'/,
    ],
    ['an empty input name', () => decode(JSON.stringify({ inputs: [int32Input('')] })), /input 0 must have a non-empty string 'name'/],
    [
      'a numeric input name',
      () => decode(JSON.stringify({ inputs: [int32Input('A'), { ...int32Input('B'), name: 5 }] })),
      /input 1 must have a non-empty string 'name'/,
    ],
    [
      'an unknown datatype',
      () => decode(JSON.stringify({ inputs: [int32Input('A', { datatype: 'COMPLEX64' })] })),
      /input 'A' has unknown datatype "COMPLEX64"/,
    ],
    [
      'a missing datatype',
      () => decode(JSON.stringify({ inputs: [int32Input('A', { datatype: undefined })] })),
      /input 'A' has unknown datatype undefined/,
    ],
    [
      'a missing shape',
      () => decode(JSON.stringify({ inputs: [int32Input('A', { shape: undefined })] })),
      /input 'A' must have a 'shape' array/,
    ],
    [
      'a shape that is not an array',
      () => decode(JSON.stringify({ inputs: [int32Input('A', { shape: 4 })] })),
      /shape of tensor 'A' must be an array/,
    ],
    [
      'a negative dimension',
      () => decode(JSON.stringify({ inputs: [int32Input('INPUT1', { shape: [1, -16] })] })),
      /^Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer: dimension 1 of input 'INPUT1' is -16$/,
      // Triton's HTTP frontend answers its failed read of an unsigned integer 500 (qa/L0_http test_negative_dimensions).
      'INTERNAL',
    ],
    ['a fractional dimension', () => decode(JSON.stringify({ inputs: [int32Input('A', { shape: [1, 2.5] })] })), /'A'.*got 2.5/],
    ['a string dimension', () => decode(JSON.stringify({ inputs: [int32Input('A', { shape: ['4'] })] })), /'A'.*got "4"/],
    [
      'a huge dimension',
      () => decode(JSON.stringify({ inputs: [int32Input('INPUT1', { shape: [1, 2 ** 52] })] })),
      /^shape \[1,4503599627370496\] of tensor 'INPUT1' has more elements than the 2147483648 one tensor may have$/,
    ],
    [
      'a byte size that overflows',
      () =>
        decode(
          JSON.stringify({
            inputs: [int32Input('INPUT1', { shape: [65536, 65536, 65536], data: undefined, parameters: { binary_data_size: 4 } })],
          }),
        ),
      /'INPUT1' has more elements than the 2147483648 one tensor may have/,
    ],
    [
      'neither data nor binary_data_size',
      () => decode(JSON.stringify({ inputs: [int32Input('A', { data: undefined })] })),
      /input 'A' has neither 'data' nor a binary_data_size parameter/,
    ],
    [
      'both data and binary_data_size',
      () => decode(...binaryBody({ inputs: [int32Input('A', { parameters: { binary_data_size: 16 } })] }, new Uint8Array(16))),
      /input 'A' has both 'data' and a binary_data_size/,
    ],
    [
      'a negative binary_data_size',
      () => decode(JSON.stringify({ inputs: [int32Input('A', { data: undefined, parameters: { binary_data_size: -4 } })] })),
      /binary_data_size of input 'A' must be a non-negative integer, got -4/,
    ],
    [
      'a string binary_data_size',
      () => decode(JSON.stringify({ inputs: [int32Input('A', { data: undefined, parameters: { binary_data_size: '16' } })] })),
      /binary_data_size of input 'A' must be a non-negative integer, got "16"/,
    ],
    [
      'binary_data_size that disagrees with the shape',
      () =>
        decode(
          ...binaryBody({ inputs: [int32Input('INPUT0', { data: undefined, parameters: { binary_data_size: 12 } })] }, new Uint8Array(12)),
        ),
      /input 'INPUT0' has binary_data_size 12, but shape \[1,4\] of INT32 needs 16 bytes/,
    ],
    [
      'binary_data_size beyond the binary part',
      () =>
        decode(...binaryBody({ inputs: [int32Input('A', { data: undefined, parameters: { binary_data_size: 16 } })] }, new Uint8Array(8))),
      /input 'A' declares binary_data_size 16, but only 8 bytes of binary data remain/,
    ],
    [
      'binary bytes that no input claims',
      () =>
        decode(...binaryBody({ inputs: [int32Input('A', { data: undefined, parameters: { binary_data_size: 16 } })] }, new Uint8Array(19))),
      /3 bytes of binary data follow the inputs and no input claims them/,
    ],
    [
      'binary data without any binary input',
      () => decode(...binaryBody({ inputs: [int32Input('A')] }, new Uint8Array(1))),
      /1 bytes of binary data follow/,
    ],
    [
      'BYTES whose length prefix runs past the end',
      () =>
        decode(
          ...binaryBody(
            { inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 2], parameters: { binary_data_size: 9 } }] },
            Uint8Array.from([1, 0, 0, 0, 0x61, 200, 0, 0, 0]),
          ),
        ),
      /BYTES tensor 'INPUT0': element 1 declares 200 bytes but only 0 remain/,
    ],
    [
      'BYTES with too few elements for the shape',
      () =>
        decode(
          ...binaryBody(
            { inputs: [{ name: 'S', datatype: 'BYTES', shape: [3], parameters: { binary_data_size: 5 } }] },
            Uint8Array.from([1, 0, 0, 0, 0x61]),
          ),
        ),
      /input 'S' holds 1 BYTES elements, but shape \[3\] needs 3/,
    ],
    [
      'FP16 in JSON',
      () => decode(JSON.stringify({ inputs: [int32Input('H', { datatype: 'FP16' })] })),
      /datatype FP16 of input 'H' must be sent as binary data/,
    ],
    [
      'a wrong element count in JSON',
      () => decode(JSON.stringify({ inputs: [int32Input('INPUT0', { shape: [1, 16], data: new Array(15).fill(0) })] })),
      /unexpected number of elements for input 'INPUT0': expected 16, got 15/,
    ],
    [
      'an out-of-range JSON element',
      () => decode(JSON.stringify({ inputs: [int32Input('A', { datatype: 'UINT8', data: [1, 2, 300, 4] })] })),
      /element 2 of input 'A' is not a valid UINT8/,
    ],
    [
      'input parameters that are not an object',
      () => decode(JSON.stringify({ inputs: [int32Input('A', { parameters: [1] })] })),
      /parameters of input 'A' must be a JSON object, got an array/,
    ],
    [
      'an input parameter that is an object',
      () => decode(JSON.stringify({ inputs: [int32Input('A', { parameters: { x: { y: 1 } } })] })),
      /parameters of input 'A': 'x' must be a string, number or boolean, got an object/,
    ],
    [
      'request parameters that are not an object',
      () => decode(JSON.stringify({ parameters: 'fast', inputs: [int32Input('A')] })),
      /request parameters must be a JSON object, got "fast"/,
    ],
    [
      'binary_data_output that is not a boolean',
      () => decode(JSON.stringify({ parameters: { binary_data_output: 1 }, inputs: [int32Input('A')] })),
      /request parameters: 'binary_data_output' must be true or false, got 1/,
    ],
    ['an id that is not a string', () => decode(JSON.stringify({ id: 7, inputs: [int32Input('A')] })), /'id' must be a string, got 7/],
    [
      'outputs that are not an array',
      () => decode(JSON.stringify({ inputs: [int32Input('A')], outputs: 'OUT' })),
      /'outputs' must be an array, got "OUT"/,
    ],
    [
      'an output that is not an object',
      () => decode(JSON.stringify({ inputs: [int32Input('A')], outputs: [['OUT']] })),
      /output 0 must be a JSON object, got an array/,
    ],
    [
      'an output without a name',
      () => decode(JSON.stringify({ inputs: [int32Input('A')], outputs: [{}] })),
      /output 0 must have a non-empty string 'name'/,
    ],
    [
      'binary_data that is not a boolean',
      () => decode(JSON.stringify({ inputs: [int32Input('A')], outputs: [{ name: 'O', parameters: { binary_data: 'yes' } }] })),
      /parameters of output 'O': 'binary_data' must be true or false, got "yes"/,
    ],
    [
      'a shared memory input that also has data',
      () =>
        decode(JSON.stringify({ inputs: [int32Input('A', { parameters: { shared_memory_region: 'r', shared_memory_byte_size: 16 } })] })),
      /input 'A' is in shared memory region 'r' and must not also have 'data'/,
    ],
    [
      'a shared memory input with the wrong byte size',
      () =>
        decode(
          JSON.stringify({
            inputs: [int32Input('A', { data: undefined, parameters: { shared_memory_region: 'r', shared_memory_byte_size: 12 } })],
          }),
        ),
      /input 'A' has shared_memory_byte_size 12, but shape \[1,4\] of INT32 needs 16 bytes/,
    ],
    [
      'a shared memory region without a byte size',
      () => decode(JSON.stringify({ inputs: [int32Input('A')], outputs: [{ name: 'O', parameters: { shared_memory_region: 'r' } }] })),
      /output 'O': shared_memory_region 'r' needs shared_memory_byte_size/,
    ],
    [
      'a negative shared memory offset',
      () =>
        decode(
          JSON.stringify({
            inputs: [int32Input('A')],
            outputs: [{ name: 'O', parameters: { shared_memory_region: 'r', shared_memory_byte_size: 4, shared_memory_offset: -1 } }],
          }),
        ),
      /output 'O': shared_memory_offset must be a non-negative integer, got -1/,
    ],
    [
      'a shared memory region that is not a string',
      () =>
        decode(
          JSON.stringify({
            inputs: [int32Input('A', { data: undefined, parameters: { shared_memory_region: 3, shared_memory_byte_size: 16 } })],
          }),
        ),
      /input 'A': shared_memory_region must be a non-empty string, got 3/,
    ],
  ];
  for (const [what, run, message, code = 'INVALID_ARG'] of cases) {
    it(`refuses ${what}`, () => {
      const e = failure(run);
      expect(e.code).toBe(code);
      expect(e.message).toMatch(message);
    });
  }
});

describe('decodeHttpInferRequest with shared memory', () => {
  it('leaves shared memory inputs to be read by core and marks shared memory outputs', () => {
    const request = decode(
      JSON.stringify({
        inputs: [
          int32Input('A', {
            data: undefined,
            parameters: { shared_memory_region: 'in', shared_memory_byte_size: 16, shared_memory_offset: 32 },
          }),
        ],
        outputs: [{ name: 'O', parameters: { binary_data: false, shared_memory_region: 'out', shared_memory_byte_size: 64 } }],
      }),
    );
    expect(request.inputs[0]).toMatchObject({
      name: 'A',
      data: new Uint8Array(0),
      sharedMemory: { region: 'in', byteSize: 16, offset: 32 },
    });
    expect(request.outputs![0]).toMatchObject({ name: 'O', sharedMemory: { region: 'out', byteSize: 64, offset: 0 } });
  });
});

describe('encodeHttpInferResponse', () => {
  const tensor = (name: string, datatype: Tensor['datatype'] = 'INT32'): Tensor => {
    const sample = SAMPLES.find((s) => s.datatype === datatype)!;
    return { name, datatype, shape: sample.shape, data: sample.bytes };
  };
  const response = (...outputs: Tensor[]): InferenceResponse => ({ modelName: 'm', modelVersion: '1', outputs });
  const request = (extra: Partial<InferenceRequest> = {}): InferenceRequest => ({ modelName: 'm', inputs: [], parameters: {}, ...extra });

  it('writes JSON only when no output is binary', () => {
    const encoded = encodeHttpInferResponse({ ...response(tensor('A'), tensor('S', 'BYTES')), id: 'r1', parameters: { x: 1 } }, request());
    expect(encoded.contentType).toBe('application/json');
    expect(encoded.headerLength).toBeUndefined();
    expect(encoded.chunks).toHaveLength(1);
    expect(JSON.parse(encoded.chunks[0]!.toString())).toEqual({
      model_name: 'm',
      model_version: '1',
      id: 'r1',
      parameters: { x: 1 },
      outputs: [
        { name: 'A', datatype: 'INT32', shape: [2, 3], data: SAMPLES.find((s) => s.datatype === 'INT32')!.json },
        { name: 'S', datatype: 'BYTES', shape: [2, 3], data: ['', 'hello', 'wörld', '日本語', '🙂 emoji', ''] },
      ],
    });
  });

  it('writes outputs asked for with binary_data: true after the JSON, without copying them', () => {
    const a = tensor('A');
    const encoded = encodeHttpInferResponse(
      response(a, tensor('B')),
      request({ outputs: [{ name: 'A', parameters: { binary_data: true } }] }),
    );
    expect(encoded.contentType).toBe('application/octet-stream');
    expect(encoded.chunks).toHaveLength(2);
    expect(encoded.headerLength).toBe(encoded.chunks[0]!.length);
    expect(encoded.chunks[1]!.buffer).toBe(a.data.buffer);
    const { json, binary } = split(encoded);
    expect(json.outputs[0]).toEqual({ name: 'A', datatype: 'INT32', shape: [2, 3], parameters: { binary_data_size: 24 } });
    expect(json.outputs[1].data).toHaveLength(6);
    expect(binary.get('A')).toEqual(Buffer.from(a.data));
  });

  it('binary_data_output makes every output binary except those asked explicitly as JSON', () => {
    const encoded = encodeHttpInferResponse(
      response(tensor('A'), tensor('B'), tensor('C')),
      request({
        parameters: { binary_data_output: true },
        outputs: [
          { name: 'B', parameters: { binary_data: false } },
          { name: 'C', parameters: {} },
        ],
      }),
    );
    const { json, binary } = split(encoded);
    expect([...binary.keys()]).toEqual(['A', 'C']);
    expect(json.outputs[1].data).toHaveLength(6);
  });

  it('FP16 and BF16 are always binary, even when asked as JSON', () => {
    const encoded = encodeHttpInferResponse(
      response(tensor('H', 'FP16'), tensor('G', 'BF16')),
      request({ outputs: [{ name: 'H', parameters: { binary_data: false } }] }),
    );
    expect([...split(encoded).binary.keys()]).toEqual(['H', 'G']);
  });

  it('counts the header length in bytes, not characters', () => {
    const encoded = encodeHttpInferResponse(
      { ...response(tensor('A')), id: 'wörld-日本' },
      request({ parameters: { binary_data_output: true } }),
    );
    expect(encoded.headerLength).toBe(Buffer.byteLength(encoded.chunks[0]!.toString()));
    expect(split(encoded).json.id).toBe('wörld-日本');
  });
});

describe('round trips through the wire format', () => {
  for (const sample of SAMPLES) {
    it(`${sample.datatype}: binary in, binary and (where possible) JSON out`, () => {
      const [body, headerLength] = binaryBody(
        { inputs: [{ name: 'IN', datatype: sample.datatype, shape: sample.shape, parameters: { binary_data_size: sample.bytes.length } }] },
        sample.bytes,
      );
      const request = decode(body, headerLength);
      const input = request.inputs[0]!;
      expect(input.data.buffer).toBe(body.buffer);
      expect(input.data).toEqual(sample.bytes);

      const binary = split(encodeHttpInferResponse(response(input), { ...request, parameters: { binary_data_output: true } }));
      expect(binary.json.outputs[0]).toMatchObject({ name: 'IN', datatype: sample.datatype, shape: sample.shape });
      expect(new Uint8Array(binary.binary.get('IN')!)).toEqual(sample.bytes);

      if (sample.json) {
        const { json } = split(encodeHttpInferResponse(response(input), request));
        expect(json.outputs[0].data).toEqual(sample.json);
        const again = decode(
          JSON.stringify({ inputs: [{ name: 'IN', datatype: sample.datatype, shape: sample.shape, data: json.outputs[0].data }] }),
        );
        expect(again.inputs[0]!.data).toEqual(sample.bytes);
      }
    });
  }

  function response(...outputs: Tensor[]): InferenceResponse {
    return { modelName: 'm', modelVersion: '1', outputs };
  }

  const sampleFor = (datatype: string) => SAMPLES.find((s) => s.datatype === datatype)!;
  const wireInput = fc.record({
    datatype: fc.constantFrom(...DATATYPES),
    binary: fc.boolean(),
    nested: fc.boolean(),
  });

  it('property: any mix of binary and JSON inputs decodes to the tensors that were sent', () => {
    fc.assert(
      fc.property(fc.array(wireInput, { maxLength: 6 }), fc.option(fc.string(), { nil: undefined }), (specs, id) => {
        const binaries: Uint8Array[] = [];
        const inputs = specs.map(({ datatype, binary, nested }, i) => {
          const sample = sampleFor(datatype);
          const base = { name: `IN${i}`, datatype, shape: sample.shape };
          if (binary || !sample.json) {
            binaries.push(sample.bytes);
            return { ...base, parameters: { binary_data_size: sample.bytes.length } };
          }
          return { ...base, data: nested ? [sample.json.slice(0, 3), sample.json.slice(3)] : sample.json };
        });
        const [body, headerLength] = binaryBody({ ...(id !== undefined && { id }), inputs }, ...binaries);
        const request = decode(body, binaries.length > 0 || specs.length % 2 ? headerLength : undefined);
        expect(request.id).toBe(id);
        expect(request.inputs.map((t) => [t.name, t.datatype, t.shape, [...t.data]])).toEqual(
          specs.map(({ datatype }, i) => [`IN${i}`, datatype, sampleFor(datatype).shape, [...sampleFor(datatype).bytes]]),
        );
      }),
      { numRuns: 200 },
    );
  });

  it('property: random and mutated bodies and header lengths only ever throw InferenceServerError', () => {
    const [validBody, validLength] = binaryBody(
      {
        id: 'x',
        parameters: { binary_data_output: true },
        inputs: [
          { name: 'A', datatype: 'FP32', shape: [2, 3], parameters: { binary_data_size: 24 } },
          { name: 'S', datatype: 'BYTES', shape: [2, 3], parameters: { binary_data_size: sampleFor('BYTES').bytes.length } },
          {
            name: 'J',
            datatype: 'INT8',
            shape: [2, 3],
            data: [
              [1, 2, 3],
              [4, 5, 6],
            ],
          },
        ],
        outputs: [{ name: 'O', parameters: { binary_data: true } }],
      },
      sampleFor('FP32').bytes,
      sampleFor('BYTES').bytes,
    );
    const mutatedBody = fc
      .tuple(fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }), fc.nat(), fc.boolean())
      .map(([edits, cut, truncate]) => {
        const body = Buffer.from(validBody);
        for (const [at, value] of edits) body[at % body.length] = value;
        return truncate ? body.subarray(0, cut % body.length) : body;
      });
    const headerLength = fc.oneof(
      fc.constant(validLength),
      fc.constant(undefined),
      fc.nat({ max: validBody.length + 5 }).map(String),
      fc.string(),
    );
    const jsonBody = fc.jsonValue({ maxDepth: 5 }).map((v) => Buffer.from(JSON.stringify(v)));
    fc.assert(
      fc.property(
        fc.oneof(
          mutatedBody,
          jsonBody,
          fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
        ),
        headerLength,
        (body, length) => {
          let request: InferenceRequest;
          try {
            request = decodeHttpInferRequest(body, length, 'm', undefined);
          } catch (e) {
            expect(e).toBeInstanceOf(InferenceServerError);
            return;
          }
          // Whatever decoded must encode back without anything but InferenceServerError.
          try {
            split(encodeHttpInferResponse(response(...request.inputs), request));
          } catch (e) {
            expect(e).toBeInstanceOf(InferenceServerError);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });
});
