import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ResponseOutput } from '../protocol/types.ts';
import { DATATYPES } from '../tensor/datatype.ts';
import type { ParameterValue, Parameters } from '../tensor/tensor.ts';
import { FINAL_RESPONSE_PARAMETER, frameInferResponse, frameStreamInferResponse, type ResponseFields } from './infer-response-writer.ts';
import { loadGrpcServiceRoot, PROTO_LOADER_OPTIONS } from './protos.ts';

/**
 * The hand-written ModelInferResponse against protobufjs: the object the frontend built before the
 * writer (and grpc-js serialized through protobufjs) must encode to the same bytes, and decode to
 * the same object.
 */
const root = loadGrpcServiceRoot();
const responseType = root.lookupType('inference.ModelInferResponse');
const streamType = root.lookupType('inference.ModelStreamInferResponse');

/** Plain values as InferParameter objects: integers travel as int64, other numbers as double. */
function parameterObject(value: ParameterValue): Record<string, unknown> {
  if (typeof value === 'boolean') return { bool_param: value };
  if (typeof value === 'string') return { string_param: value };
  return Number.isSafeInteger(value) ? { int64_param: value } : { double_param: value };
}

function responseObject(r: ResponseFields, final?: boolean): Record<string, unknown> {
  const parameters: Parameters = { ...r.parameters, ...(final !== undefined && { [FINAL_RESPONSE_PARAMETER]: final }) };
  return {
    model_name: r.modelName,
    model_version: r.modelVersion,
    id: r.id ?? '',
    parameters: Object.fromEntries(Object.entries(parameters).map(([k, v]) => [k, parameterObject(v)])),
    outputs: r.outputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: [...t.shape] })),
    raw_output_contents: r.outputs.map((t) => (t.sharedMemory ? new Uint8Array(0) : t.data)),
  };
}

function protobufjsBytes(r: ResponseFields): Buffer {
  return Buffer.from(responseType.encode(responseType.fromObject(responseObject(r))).finish());
}

function protobufjsStreamBytes(errorMessage: string, r: ResponseFields, final: boolean): Buffer {
  const object = { error_message: errorMessage, infer_response: responseObject(r, final) };
  return Buffer.from(streamType.encode(streamType.fromObject(object)).finish());
}

/** The message of a framed one, its prefix checked. */
function unframed(framed: Buffer): Buffer {
  expect(framed[0]).toBe(0);
  expect(framed.readUInt32BE(1)).toBe(framed.length - 5);
  return framed.subarray(5);
}

const text = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constant(''),
  fc.string({ minLength: 100, maxLength: 300 }),
);
const parameterValue: fc.Arbitrary<ParameterValue> = fc.oneof(
  fc.boolean(),
  text,
  fc.integer(),
  fc.maxSafeInteger(),
  fc.maxSafeNat().map((n) => -n),
  fc.double(),
  fc.constantFrom(2 ** 53, -(2 ** 60), 0.5, -0, Number.NaN, Number.POSITIVE_INFINITY),
);
const parameters: fc.Arbitrary<Parameters> = fc.dictionary(
  fc.oneof(text, fc.constantFrom('1', '02', FINAL_RESPONSE_PARAMETER)),
  parameterValue,
  {
    maxKeys: 5,
  },
);
const output: fc.Arbitrary<ResponseOutput> = fc.record(
  {
    name: text,
    datatype: fc.constantFrom(...DATATYPES),
    shape: fc.array(fc.oneof(fc.nat(20), fc.nat(2 ** 40), fc.constant(0)), { maxLength: 5 }),
    data: fc.oneof(fc.uint8Array({ maxLength: 200 }), fc.uint8Array({ minLength: 20_000, maxLength: 20_000 })),
    sharedMemory: fc.constant({ region: 'r', byteSize: 4, offset: 0 }),
  },
  { requiredKeys: ['name', 'datatype', 'shape', 'data'] },
);
const response: fc.Arbitrary<ResponseFields> = fc.record(
  { modelName: text, modelVersion: text, id: text, parameters, outputs: fc.array(output, { maxLength: 4 }) },
  { requiredKeys: ['modelName', 'modelVersion', 'outputs'] },
);

describe('frameInferResponse', () => {
  it("writes protobufjs's bytes for the response object, framed", () => {
    fc.assert(
      fc.property(response, (r) => {
        expect(unframed(frameInferResponse(r)).equals(protobufjsBytes(r))).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('decodes as protobufjs decodes its own encoding', () => {
    fc.assert(
      fc.property(response, (r) => {
        const decoded = responseType.toObject(responseType.decode(unframed(frameInferResponse(r))), PROTO_LOADER_OPTIONS);
        expect(decoded).toEqual(responseType.toObject(responseType.decode(protobufjsBytes(r)), PROTO_LOADER_OPTIONS));
      }),
      { numRuns: 50 },
    );
  });

  it('writes the cases by hand: empty, BYTES, shared memory outputs, each kind of parameter', () => {
    const cases: ResponseFields[] = [
      { modelName: '', modelVersion: '', outputs: [] },
      {
        modelName: 'm',
        modelVersion: '1',
        id: 'req-1',
        outputs: [{ name: 'E', datatype: 'FP32', shape: [0, 3], data: new Uint8Array(0) }],
      },
      {
        modelName: 'text',
        modelVersion: '2',
        outputs: [{ name: 'S', datatype: 'BYTES', shape: [2], data: Uint8Array.of(1, 0, 0, 0, 0x61, 2, 0, 0, 0, 0xc3, 0xa9) }],
      },
      {
        modelName: 'shm',
        modelVersion: '1',
        outputs: [
          { name: 'A', datatype: 'INT32', shape: [1, 2], data: new Uint8Array(8), sharedMemory: { region: 'r', byteSize: 8, offset: 0 } },
          { name: 'B', datatype: 'INT32', shape: [1, 2], data: Uint8Array.of(1, 0, 0, 0, 2, 0, 0, 0) },
        ],
      },
      {
        modelName: 'p',
        modelVersion: '1',
        parameters: { b: true, f: false, s: 'x', i: 7, n: -7, big: 2 ** 53 - 1, d: 0.25, u: 2 ** 64 },
        outputs: [{ name: 'O', datatype: 'UINT64', shape: [], data: new Uint8Array(8) }],
      },
    ];
    for (const r of cases) expect(unframed(frameInferResponse(r)).equals(protobufjsBytes(r))).toBe(true);
  });
});

describe('frameStreamInferResponse', () => {
  it("writes protobufjs's bytes for error_message and the response with triton_final_response", () => {
    fc.assert(
      fc.property(text, response, fc.boolean(), (errorMessage, r, final) => {
        expect(unframed(frameStreamInferResponse(errorMessage, r, final)).equals(protobufjsStreamBytes(errorMessage, r, final))).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('sets triton_final_response where the response has it already, in its place', () => {
    const r: ResponseFields = { modelName: 'm', modelVersion: '1', parameters: { [FINAL_RESPONSE_PARAMETER]: 'wrong', z: 1 }, outputs: [] };
    const decoded = streamType.toObject(streamType.decode(unframed(frameStreamInferResponse('', r, true))), PROTO_LOADER_OPTIONS) as {
      infer_response: { parameters: Record<string, unknown> };
    };
    expect(Object.keys(decoded.infer_response.parameters)).toEqual([FINAL_RESPONSE_PARAMETER, 'z']);
    expect(decoded.infer_response.parameters[FINAL_RESPONSE_PARAMETER]).toEqual({ bool_param: true, parameter_choice: 'bool_param' });
  });
});
