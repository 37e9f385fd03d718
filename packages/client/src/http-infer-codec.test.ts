import { describe, expect, it } from 'vitest';
import { decodeHttpInferResponse, encodeHttpInferRequest, encodeRawHttpInferRequest } from './http-infer-codec.ts';

describe('encodeHttpInferRequest', () => {
  it('binary: JSON header with binary_data_size, then the tensors; asks for binary outputs', () => {
    const { headers, body } = encodeHttpInferRequest({
      model: 'm',
      inputs: [{ name: 'A', datatype: 'INT32', shape: [1, 2], data: [1, 2] }],
    });
    const length = Number(headers['inference-header-content-length']);
    expect(JSON.parse(body.subarray(0, length).toString())).toEqual({
      parameters: { binary_data_output: true },
      inputs: [{ name: 'A', shape: [1, 2], datatype: 'INT32', parameters: { binary_data_size: 8 } }],
    });
    expect([...body.subarray(length)]).toEqual([1, 0, 0, 0, 2, 0, 0, 0]);
  });

  it('JSON: data inline, requested outputs without binary_data', () => {
    const { headers, body } = encodeHttpInferRequest({
      model: 'm',
      id: 'r',
      binary: false,
      parameters: { priority: 1 },
      outputs: ['O'],
      inputs: [{ name: 'A', datatype: 'INT64', shape: [1], data: [2n ** 60n] }],
    });
    expect(headers['content-type']).toBe('application/json');
    expect(body.toString()).toBe(
      '{"id":"r","parameters":{"priority":1},"outputs":[{"name":"O"}],"inputs":[{"name":"A","shape":[1],"datatype":"INT64","data":[1152921504606846976]}]}',
    );
  });

  it('JSON: -0 keeps its sign', () => {
    const { body } = encodeHttpInferRequest({
      model: 'm',
      binary: false,
      inputs: [{ name: 'A', datatype: 'FP32', shape: [2], data: Float32Array.of(-0, 0) }],
    });
    expect(body.toString()).toContain('"data":[-0.0,0]');
  });
});

describe('decodeHttpInferResponse', () => {
  it('reads binary outputs in order and JSON outputs inline', () => {
    const header = Buffer.from(
      JSON.stringify({
        model_name: 'm',
        model_version: '1',
        outputs: [
          { name: 'A', datatype: 'FP32', shape: [1], parameters: { binary_data_size: 4 } },
          { name: 'B', datatype: 'INT32', shape: [2], data: [3, 4] },
          { name: 'C', datatype: 'BYTES', shape: [1], parameters: { binary_data_size: 6 } },
        ],
      }),
    );
    const body = Buffer.concat([header, Buffer.from(Float32Array.of(2.5).buffer), Buffer.from([2, 0, 0, 0, 104, 105])]);
    const r = decodeHttpInferResponse(body, String(header.byteLength));
    expect(r.modelVersion).toBe('1');
    expect(r.outputs.map((o) => o.data)).toEqual([Float32Array.of(2.5), Int32Array.of(3, 4), [new Uint8Array(Buffer.from('hi'))]]);
  });
});

describe('decodeHttpInferResponse: JSON outputs as Triton writes them', () => {
  it('keeps NaN and ±Infinity in FP outputs and every digit of 64-bit integers', () => {
    const text =
      '{"model_name":"m","model_version":"1","outputs":[' +
      '{"name":"F","datatype":"FP32","shape":[4],"data":[NaN,Infinity,-Infinity,1.5]},' +
      '{"name":"S","datatype":"BYTES","shape":[1],"data":["NaN 12345678901234567"]},' +
      '{"name":"I","datatype":"INT64","shape":[2],"data":[-9223372036854775808,9007199254740993]},' +
      '{"name":"U","datatype":"UINT64","shape":[1],"data":[18446744073709551615]}]}';
    const result = decodeHttpInferResponse(Buffer.from(text), undefined);
    const [f, s, i, u] = result.outputs.map((o) => o.data);
    expect([...(f as Float32Array)]).toEqual([NaN, Infinity, -Infinity, 1.5]);
    expect(new TextDecoder().decode((s as Uint8Array[])[0])).toBe('NaN 12345678901234567');
    expect([...(i as BigInt64Array)]).toEqual([-(2n ** 63n), 2n ** 53n + 1n]);
    expect([...(u as BigUint64Array)]).toEqual([2n ** 64n - 1n]);
  });
});

describe('encodeRawHttpInferRequest', () => {
  it("sends the one input's bytes with a header length of 0; a BYTES element without its length prefix", () => {
    const fp32 = encodeRawHttpInferRequest({ model: 'm', inputs: [{ name: 'A', datatype: 'FP32', shape: [1, 2], data: [1.5, -2] }] });
    expect(fp32.headers).toEqual({ 'content-type': 'application/octet-stream', 'inference-header-content-length': '0' });
    expect([...new Float32Array(fp32.body.buffer.slice(fp32.body.byteOffset, fp32.body.byteOffset + fp32.body.byteLength))]).toEqual([
      1.5, -2,
    ]);
    expect(
      encodeRawHttpInferRequest({ model: 'm', inputs: [{ name: 'S', datatype: 'BYTES', shape: [1], data: ['427'] }] }).body.toString(),
    ).toBe('427');
  });

  it('refuses what a raw request cannot carry', () => {
    const input = { name: 'A', datatype: 'INT32', shape: [1], data: [1] } as const;
    expect(() => encodeRawHttpInferRequest({ model: 'm', inputs: [input, { ...input, name: 'B' }] })).toThrow(/exactly one input/);
    expect(() => encodeRawHttpInferRequest({ model: 'm', inputs: [input], outputs: ['O'] })).toThrow(/no JSON/);
    expect(() =>
      encodeRawHttpInferRequest({ model: 'm', inputs: [{ name: 'S', datatype: 'BYTES', shape: [2], data: ['a', 'b'] }] }),
    ).toThrow(/one element; 'S' has 2/);
  });
});
