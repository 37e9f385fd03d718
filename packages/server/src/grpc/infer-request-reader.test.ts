import { loadSync } from '@grpc/proto-loader';
import { loadPackageDefinition, type ServiceDefinition } from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { encodeInferRequest } from '../../test-support/grpc-wire.ts';
import { int64Text, readModelInferRequest, uint64Text } from './infer-request-reader.ts';
import { PROTO_DIR, PROTO_LOADER_OPTIONS } from './protos.ts';

/** The source of truth: what @grpc/proto-loader (grpc-js's servers and clients) decodes from the same bytes. */
const service = (loadPackageDefinition(loadSync('grpc_service.proto', { ...PROTO_LOADER_OPTIONS, includeDirs: [PROTO_DIR] })) as any)
  .inference.GRPCInferenceService.service as ServiceDefinition;
const protoLoaderDecode = (message: Buffer) => service['ModelInfer']!.requestDeserialize(message) as Record<string, any>;

/** Both readings without the inputs' contents (ours stay on the wire); whether each input has them is compared. */
function expectSameAsProtoLoader(message: Buffer): void {
  const expected = protoLoaderDecode(message);
  const { request, contents } = readModelInferRequest(message);
  expect(contents.map((c) => c !== undefined)).toEqual(expected['inputs'].map((i: { contents: unknown }) => i.contents !== null));
  for (const input of expected['inputs']) delete input.contents;
  expect(request).toEqual(expected);
}

/** A small seeded generator (mulberry32): the same messages on every run. */
function random(seed: number) {
  let a = seed;
  const next = () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!;
  const times = <T>(max: number, make: () => T): T[] => Array.from({ length: Math.floor(next() * (max + 1)) }, make);
  return { pick, times };
}

const TEXTS = ['', 'x', 'INPUT0', 'FP32', 'simple', 'ünïcødé ✓', '名前', 'a'.repeat(200), 'sequence_id', 'binary_data_size'];
const INT64S = [
  0,
  1,
  -1,
  16,
  2 ** 31,
  -(2 ** 31),
  2 ** 32,
  2 ** 40,
  -(2 ** 40),
  2 ** 53 - 1,
  -(2 ** 53) + 1,
  '9007199254740993',
  '-9007199254740993',
  '9223372036854775807',
  '-9223372036854775808',
];
const UINT64S = [0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, '9007199254740993', '18446744073709551615'];
const DOUBLES = [0, -0, 1.5, -2.25, 1e308, Number.MIN_VALUE, Infinity, -Infinity];

function randomRequest(seed: number): Record<string, unknown> {
  const { pick, times } = random(seed);
  const parameter = (): Record<string, unknown> =>
    pick([
      () => ({ bool_param: pick([true, false]) }),
      () => ({ int64_param: pick(INT64S) }),
      () => ({ string_param: pick(TEXTS) }),
      () => ({ double_param: pick(DOUBLES) }),
      () => ({ uint64_param: pick(UINT64S) }),
      () => ({}),
    ])();
  const parameters = () => Object.fromEntries(times(3, () => [pick(TEXTS), parameter()]));
  return {
    model_name: pick(TEXTS),
    model_version: pick(['', '1', '17']),
    id: pick(TEXTS),
    parameters: parameters(),
    inputs: times(3, () => ({
      name: pick(TEXTS),
      datatype: pick(['FP32', 'INT64', 'BYTES', '', 'NOT_A_TYPE']),
      shape: times(4, () => pick(INT64S)),
      parameters: parameters(),
      ...(pick([true, false]) && {
        contents: pick([{ fp32_contents: [1, 2] }, { bytes_contents: [Buffer.from('ab')] }, { int64_contents: ['-5'] }]),
      }),
    })),
    outputs: times(2, () => ({ name: pick(TEXTS), parameters: parameters() })),
    raw_input_contents: times(2, () => Buffer.from(pick(TEXTS))),
  };
}

describe('ModelInferRequest read in one pass', () => {
  it('reads 500 generated requests as @grpc/proto-loader does: texts, maps, every parameter type, 64-bit shapes and values', () => {
    for (let seed = 1; seed <= 500; seed++) expectSameAsProtoLoader(encodeInferRequest(randomRequest(seed)));
  });

  it('reads the empty message with every default filled in', () => {
    expectSameAsProtoLoader(Buffer.alloc(0));
    expect(readModelInferRequest(Buffer.alloc(0)).request).toEqual({
      model_name: '',
      model_version: '',
      id: '',
      parameters: {},
      inputs: [],
      outputs: [],
      raw_input_contents: [],
    });
  });

  it('keeps raw_input_contents as views on the message, not copies', () => {
    const message = encodeInferRequest({ raw_input_contents: [Buffer.from([1, 2, 3, 4])] });
    const raw = readModelInferRequest(message).request.raw_input_contents![0]!;
    expect(raw.buffer).toBe(message.buffer);
    expect([...raw]).toEqual([1, 2, 3, 4]);
  });

  it('takes a shape sent unpacked, fields sent twice (the last wins, a map key too), and skips unknown fields', () => {
    const input = protobuf.Writer.create()
      .uint32((1 << 3) | 2)
      .string('IN');
    for (const d of [2, -3]) input.uint32((3 << 3) | 0).int64(d);
    const entry = (key: string, value: number) =>
      protobuf.Writer.create()
        .uint32((1 << 3) | 2)
        .string(key)
        .uint32((2 << 3) | 2)
        .bytes(
          protobuf.Writer.create()
            .uint32((2 << 3) | 0)
            .int64(value)
            .finish(),
        )
        .finish();
    const message = Buffer.from(
      protobuf.Writer.create()
        .uint32((1 << 3) | 2)
        .string('first')
        .uint32((99 << 3) | 0)
        .uint64(7)
        .uint32((1 << 3) | 2)
        .string('second')
        .uint32((4 << 3) | 2)
        .bytes(entry('k', 1))
        .uint32((4 << 3) | 2)
        .bytes(entry('k', 2))
        .uint32((5 << 3) | 2)
        .bytes(input.finish())
        .uint32((98 << 3) | 5)
        .fixed32(1)
        .finish(),
    );
    expectSameAsProtoLoader(message);
    const { request } = readModelInferRequest(message);
    expect(request.model_name).toBe('second');
    expect(request.parameters).toEqual({ k: { int64_param: '2', parameter_choice: 'int64_param' } });
    expect(request.inputs[0]!.shape).toEqual(['2', '-3']);
  });

  it('skips a known field sent with another wire type, as protobuf C++ (Triton) does', () => {
    const message = Buffer.from(
      protobuf.Writer.create()
        .uint32((1 << 3) | 0)
        .uint32(5)
        .uint32((2 << 3) | 2)
        .string('1')
        .finish(),
    );
    expect(readModelInferRequest(message).request).toMatchObject({ model_name: '', model_version: '1' });
  });

  it('a map entry without its value holds the empty parameter, and __proto__ is a key like any other', () => {
    const entry = protobuf.Writer.create()
      .uint32((1 << 3) | 2)
      .string('__proto__')
      .finish();
    const message = Buffer.from(
      protobuf.Writer.create()
        .uint32((4 << 3) | 2)
        .bytes(entry)
        .finish(),
    );
    const { parameters } = readModelInferRequest(message).request;
    expect(Object.keys(parameters!)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(parameters)).toBe(Object.prototype);
  });

  it.each([
    ['a field past the end', Buffer.from([0x0a, 0x05, 0x61])],
    ['a shape varint past its packed run', Buffer.from([0x2a, 0x04, 0x1a, 0x01, 0x80, 0x01])],
    ['a double cut short', Buffer.from([0x22, 0x07, 0x12, 0x05, 0x21, 0, 0, 0, 0])],
    ['a varint of 11 bytes', Buffer.from([0x08, ...new Array(10).fill(0xff), 0x01])],
  ])('refuses %s as INVALID_ARG', (_what, message) => {
    expect(() => readModelInferRequest(message)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARG', message: expect.stringMatching(/^malformed ModelInferRequest/) }),
    );
  });

  it('writes 64-bit values as protobufjs writes a Long', () => {
    const cases: [bigint, string, string][] = [
      [0n, '0', '0'],
      [(1n << 53n) + 1n, '9007199254740993', '9007199254740993'],
      [-1n, '-1', '18446744073709551615'],
      [-(1n << 53n), '-9007199254740992', '18437736874454810624'],
      [-(1n << 63n), '-9223372036854775808', '9223372036854775808'],
      [(1n << 63n) - 1n, '9223372036854775807', '9223372036854775807'],
    ];
    for (const [value, signed, unsigned] of cases) {
      const bits = BigInt.asUintN(64, value);
      const low = Number(bits & 0xffffffffn);
      const high = Number(bits >> 32n);
      expect(int64Text(low, high)).toBe(signed);
      expect(uint64Text(low, high)).toBe(unsigned);
    }
  });
});
