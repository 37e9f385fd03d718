import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InferenceServerError } from '../errors/errors.ts';
import { DATATYPES, ELEMENT_BYTE_SIZE, type DataType } from './datatype.ts';
import { decodeJsonTensorData, encodeJsonTensorData } from './json-codec.ts';
import { SAMPLES, unaligned } from '../../test-support/tensor-samples.ts';

function nest(values: unknown[], width: number): unknown[][] {
  const rows: unknown[][] = [];
  for (let i = 0; i < values.length; i += width) rows.push(values.slice(i, i + width));
  return rows;
}

function messageOf(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(InferenceServerError);
    expect((e as InferenceServerError).code).toBe('INVALID_ARG');
    return (e as Error).message;
  }
  throw new Error('expected an error');
}

describe('JSON tensor codec', () => {
  for (const sample of SAMPLES) {
    const { datatype, shape, json } = sample;
    if (!json) {
      it(`${datatype} is refused in JSON both ways`, () => {
        expect(messageOf(() => decodeJsonTensorData('X', datatype, shape, [1, 2, 3, 4, 5, 6]))).toBe(
          `datatype ${datatype} of input 'X' must be sent as binary data, not JSON`,
        );
        expect(messageOf(() => encodeJsonTensorData({ name: 'Y', datatype, shape, data: sample.bytes }))).toMatch(
          new RegExp(`output 'Y' of datatype ${datatype} can only be returned as binary`),
        );
      });
      continue;
    }
    it(`${datatype}: flat and nested JSON decode to the same bytes and encode back`, () => {
      const flat = decodeJsonTensorData('X', datatype, shape, json);
      expect(flat).toEqual(sample.bytes);
      expect(decodeJsonTensorData('X', datatype, shape, nest(json, 3))).toEqual(sample.bytes);
      expect(JSON.parse(encodeJsonTensorData({ name: 'X', datatype, shape, data: flat }))).toEqual(json);
    });
    it(`${datatype}: encodes from an unaligned view`, () => {
      expect(JSON.parse(encodeJsonTensorData({ name: 'X', datatype, shape, data: unaligned(sample.bytes) }))).toEqual(json);
    });
  }

  it('accepts a scalar for a shape with one element and an empty array for zero elements', () => {
    expect([...decodeJsonTensorData('X', 'INT8', [], -3)]).toEqual([253]);
    expect(decodeJsonTensorData('X', 'FP32', [0, 4], []).byteLength).toBe(0);
    expect(decodeJsonTensorData('X', 'BYTES', [0], [[]]).byteLength).toBe(0);
  });

  it('refuses a wrong element count, naming the input', () => {
    const data = Array.from({ length: 15 }, (_, i) => i);
    expect(messageOf(() => decodeJsonTensorData('INPUT0', 'INT32', [1, 16], data))).toBe(
      "unexpected number of elements for input 'INPUT0': expected 16, got 15",
    );
    expect(messageOf(() => decodeJsonTensorData('INPUT0', 'INT32', [2], [[1, 2], [3]]))).toMatch(/expected 2, got 3/);
  });

  it.each<[DataType, unknown, RegExp]>([
    ['BOOL', 1, /element 1 of BOOL input 'IN' must be true or false, got a number$/],
    ['BOOL', 'true', /element 1 of BOOL input 'IN' must be true or false, got a string$/],
    ['UINT8', 256, /element 1 of input 'IN' is not a valid UINT8: expected an integer in \[0, 255\]/],
    ['UINT8', -1, /^element 1 of input 'IN' is not a valid UINT8/],
    ['INT8', -129, /^element 1 of input 'IN' is not a valid INT8/],
    ['INT16', 32768, /^element 1 of input 'IN' is not a valid INT16/],
    ['UINT16', 1.5, /^element 1 of input 'IN' is not a valid UINT16/],
    ['INT32', 2 ** 31, /^element 1 of input 'IN' is not a valid INT32/],
    ['UINT32', 2 ** 32, /^element 1 of input 'IN' is not a valid UINT32/],
    ['INT64', 2 ** 53, /^element 1 of input 'IN' is not a valid INT64/],
    ['UINT64', -1, /^element 1 of input 'IN' is not a valid UINT64/],
    [
      'INT64',
      2n ** 63n,
      /^element 1 of input 'IN' is not a valid INT64: expected an integer in \[-9223372036854775808, 9223372036854775807\]/,
    ],
    ['UINT64', 2n ** 64n, /^element 1 of input 'IN' is not a valid UINT64/],
    ['INT32', 2n ** 60n, /^element 1 of input 'IN' is not a valid INT32/],
    ['INT32', NaN, /^element 1 of input 'IN' is not a valid INT32/],
    ['INT64', Infinity, /^element 1 of input 'IN' is not a valid INT64/],
    ['INT64', '5', /element 1 of INT64 input 'IN' must be a number, got a string$/],
    ['FP32', null, /element 1 of FP32 input 'IN' must be a number, got null/],
    ['FP64', { v: 1 }, /must be a number, got an object/],
    ['BYTES', 7, /element 1 of BYTES input 'IN' must be a string, got a number$/],
  ])('%s refuses %s, naming the element but not its value (messages reach the logs)', (datatype, bad, message) => {
    const good = datatype === 'BOOL' ? true : datatype === 'BYTES' ? 'a' : 0;
    expect(messageOf(() => decodeJsonTensorData('IN', datatype, [3], [good, bad, good]))).toMatch(message);
  });

  it('refuses bad shapes, naming the input', () => {
    expect(messageOf(() => decodeJsonTensorData('IN', 'FP32', [-1], []))).toMatch(/'IN'.*non-negative integer, got -1/);
    expect(messageOf(() => decodeJsonTensorData('IN', 'FP32', [65536, 65536, 65536], []))).toMatch(
      /'IN' has more elements than the 2147483648 one tensor may have/,
    );
  });

  it("survives 100k-deep nesting with Triton's error, and takes what its JSON nesting limit (100) allows", () => {
    const nest = (levels: number) => {
      let deep: unknown = 1;
      for (let i = 0; i < levels; i++) deep = [deep];
      return deep;
    };
    expect(messageOf(() => decodeJsonTensorData('DEEP', 'INT32', [1], nest(100_000)))).toBe(
      "JSON nesting depth exceeds maximum allowed limit (100): the data of input 'DEEP' is nested more than 100 levels deep",
    );
    // Inside a request (3 levels enclose the data) 97 levels reach the limit and 98 pass it.
    expect([...decodeJsonTensorData('OK', 'INT8', [1], nest(97), 3)]).toEqual([1]);
    expect(messageOf(() => decodeJsonTensorData('DEEP', 'INT8', [1], nest(98), 3))).toMatch(
      /\(100\): the data of input 'DEEP' is nested more than 97 levels deep/,
    );
    const cyclic: unknown[] = [];
    cyclic.push(cyclic);
    expect(messageOf(() => decodeJsonTensorData('CYC', 'INT32', [1], cyclic))).toMatch(/'CYC' is nested more than 100/);
  });

  it('takes 64-bit integers exactly from bigints (what json-text.ts gives beyond 2^53)', () => {
    const int64 = decodeJsonTensorData('BIG', 'INT64', [3], [2n ** 63n - 1n, -(2n ** 63n), 2n ** 53n + 1n]);
    expect([...new BigInt64Array(int64.buffer)]).toEqual([2n ** 63n - 1n, -(2n ** 63n), 2n ** 53n + 1n]);
    const uint64 = decodeJsonTensorData('BIG', 'UINT64', [2], [2n ** 64n - 1n, 7]);
    expect([...new BigUint64Array(uint64.buffer)]).toEqual([2n ** 64n - 1n, 7n]);
  });

  it('takes NaN and ±Infinity for FP32 and FP64, as Triton does', () => {
    const fp32 = decodeJsonTensorData('F', 'FP32', [4], [NaN, Infinity, -Infinity, 1e39]);
    expect([...new Float32Array(fp32.buffer)]).toEqual([NaN, Infinity, -Infinity, Infinity]);
    const fp64 = decodeJsonTensorData('F', 'FP64', [2], [NaN, 2n ** 64n]);
    expect([...new Float64Array(fp64.buffer)]).toEqual([NaN, 2 ** 64]);
  });

  it('writes 64-bit outputs exactly, beyond what a double carries', () => {
    const int64 = new Uint8Array(new BigInt64Array([1n, 2n ** 53n + 1n, -(2n ** 63n)]).buffer);
    expect(encodeJsonTensorData({ name: 'BIG', datatype: 'INT64', shape: [3], data: int64 })).toBe(
      '[1,9007199254740993,-9223372036854775808]',
    );
    const uint64 = new Uint8Array(new BigUint64Array([2n ** 64n - 1n]).buffer);
    expect(encodeJsonTensorData({ name: 'BIG', datatype: 'UINT64', shape: [1], data: uint64 })).toBe('[18446744073709551615]');
  });

  it('writes NaN, the infinities and -0 as Triton writes them (not null, not 0)', () => {
    for (const datatype of ['FP32', 'FP64'] as const) {
      const values = [NaN, Infinity, -Infinity, 1.5, -0];
      const data = new Uint8Array(new (datatype === 'FP32' ? Float32Array : Float64Array)(values).buffer);
      expect(encodeJsonTensorData({ name: 'F', datatype, shape: [5], data })).toBe('[NaN,Infinity,-Infinity,1.5,-0.0]');
    }
  });

  const jsonDatatypes = DATATYPES.filter((d) => d !== 'FP16' && d !== 'BF16');
  const valueOf: Record<string, fc.Arbitrary<unknown>> = {
    BOOL: fc.boolean(),
    UINT8: fc.integer({ min: 0, max: 255 }),
    INT8: fc.integer({ min: -128, max: 127 }),
    UINT16: fc.integer({ min: 0, max: 65535 }),
    INT16: fc.integer({ min: -32768, max: 32767 }),
    UINT32: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
    INT32: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
    UINT64: fc.maxSafeNat(),
    INT64: fc.maxSafeInteger(),
    FP32: fc.float({ noNaN: true, noDefaultInfinity: true }),
    FP64: fc.double({ noNaN: true, noDefaultInfinity: true }),
    BYTES: fc.string({ unit: 'grapheme' }),
  };

  it('property: decode then encode gives back the values, whatever the nesting', () => {
    const arb = fc
      .constantFrom(...jsonDatatypes)
      .chain((datatype) =>
        fc.tuple(fc.constant(datatype), fc.array(valueOf[datatype]!, { maxLength: 24 }), fc.integer({ min: 1, max: 5 })),
      );
    fc.assert(
      fc.property(arb, ([datatype, values, width]) => {
        const data = decodeJsonTensorData('P', datatype, [values.length], width > 1 ? nest(values, width) : values);
        const back = JSON.parse(encodeJsonTensorData({ name: 'P', datatype, shape: [values.length], data: unaligned(data) })) as unknown[];
        // -0 is written as 0 by JSON anyway; FP32 keeps only float precision.
        const normalize = (v: unknown) => (typeof v === 'number' ? (datatype === 'FP32' ? Math.fround(v) : v) + 0 : v);
        expect(back.map(normalize)).toEqual(values.map(normalize));
      }),
      { numRuns: 300 },
    );
  });

  it('property: any JSON value, shape and datatype either decodes to the right size or throws InferenceServerError', () => {
    const shape = fc.array(fc.oneof(fc.integer({ min: -2, max: 4 }), fc.constantFrom(0.5, 2 ** 40, NaN)), { maxLength: 3 });
    const element = fc.oneof(fc.integer({ min: -(2 ** 33), max: 2 ** 33 }), fc.double(), fc.boolean(), fc.string(), fc.constant(null));
    const data = fc.oneof(fc.jsonValue({ maxDepth: 4 }), fc.array(element, { maxLength: 16 }));
    fc.assert(
      fc.property(
        fc.constantFrom(...DATATYPES),
        fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 2 }),
        fc.array(element, { minLength: 16, maxLength: 16 }),
        (datatype, dims, pool) => {
          // Exactly the right count, values of any type: exercises the per-element checks.
          const values = pool.slice(
            0,
            dims.reduce((a, b) => a * b, 1),
          );
          try {
            const bytes = decodeJsonTensorData('R', datatype, dims, values);
            if (datatype !== 'BYTES') expect(bytes.byteLength).toBe(values.length * ELEMENT_BYTE_SIZE[datatype]);
          } catch (e) {
            expect(e).toBeInstanceOf(InferenceServerError);
            expect((e as Error).message).toContain("'R'");
          }
        },
      ),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.constantFrom(...DATATYPES), shape, data, (datatype, dims, data) => {
        try {
          const bytes = decodeJsonTensorData('R', datatype, dims, data);
          expect(bytes).toBeInstanceOf(Uint8Array);
        } catch (e) {
          expect(e).toBeInstanceOf(InferenceServerError);
        }
      }),
      { numRuns: 500 },
    );
  });
});
