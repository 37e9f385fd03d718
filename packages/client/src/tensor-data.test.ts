import { describe, expect, it } from 'vitest';
import { BatchwiseClientError } from './errors.ts';
import { inputToJsonText, outputFromJson } from './json-tensor.ts';
import { deserializeBytes, fromRawBytes, serializeBytes, toRawBytes } from './tensor-data.ts';
import type { DataType, InputData } from './types.ts';

describe('toRawBytes / fromRawBytes', () => {
  const cases: [DataType, InputData, unknown[]][] = [
    ['BOOL', [true, false], [1, 0]],
    ['UINT8', [0, 255], [0, 255]],
    ['UINT16', [65535], [65535]],
    ['UINT32', [4294967295], [4294967295]],
    ['UINT64', [2n ** 64n - 1n], [2n ** 64n - 1n]],
    ['INT8', [-128], [-128]],
    ['INT16', [-300], [-300]],
    ['INT32', Int32Array.of(-7, 7), [-7, 7]],
    ['INT64', [-(2n ** 63n), 3], [-(2n ** 63n), 3n]],
    ['FP16', Uint16Array.of(0x3c00), [0x3c00]],
    ['BF16', Uint16Array.of(0x3f80), [0x3f80]],
    ['FP32', [1.5, -2], [1.5, -2]],
    ['FP64', Float64Array.of(Math.E), [Math.E]],
  ];
  it.each(cases)('%s round-trips', (datatype, data, expected) => {
    const raw = toRawBytes('X', datatype, data);
    expect([...(fromRawBytes('X', datatype, raw) as ArrayLike<unknown> as unknown[])]).toEqual(expected);
  });

  it('uses a typed array of the right type without copying', () => {
    const data = Float32Array.of(1, 2);
    expect(toRawBytes('X', 'FP32', data).buffer).toBe(data.buffer);
  });

  it('BYTES from strings and byte arrays', () => {
    const raw = toRawBytes('X', 'BYTES', ['hé', Uint8Array.of(0, 255)]);
    expect([...raw]).toEqual([3, 0, 0, 0, 0x68, 0xc3, 0xa9, 2, 0, 0, 0, 0, 255]);
    expect((fromRawBytes('X', 'BYTES', raw) as Uint8Array[]).map((e) => [...e])).toEqual([
      [0x68, 0xc3, 0xa9],
      [0, 255],
    ]);
  });

  it('refuses FP16 given as numbers and truncated BYTES', () => {
    expect(() => toRawBytes('X', 'FP16', [1])).toThrow(BatchwiseClientError);
    expect(() => deserializeBytes('X', Uint8Array.of(5, 0, 0, 0, 1))).toThrow(/truncated/);
    expect(() => fromRawBytes('X', 'INT32', Uint8Array.of(1, 2, 3))).toThrow(/whole number/);
  });

  it('serializeBytes of nothing is empty', () => {
    expect(serializeBytes([]).byteLength).toBe(0);
  });
});

describe('JSON tensors', () => {
  it('keeps INT64 digits beyond 2^53', () => {
    expect(inputToJsonText('X', 'INT64', [9007199254740993n, -1n])).toBe('[9007199254740993,-1]');
  });
  it('writes BOOL, BYTES and floats', () => {
    expect(inputToJsonText('X', 'BOOL', [true, false])).toBe('[true,false]');
    expect(inputToJsonText('X', 'BYTES', ['a"b', new TextEncoder().encode('c')])).toBe('["a\\"b","c"]');
    expect(JSON.parse(inputToJsonText('X', 'FP32', Float32Array.of(0.1)))[0]).toBe(Math.fround(0.1));
  });
  it('refuses what JSON cannot carry', () => {
    expect(() => inputToJsonText('X', 'FP16', Uint16Array.of(1))).toThrow(/binary: true/);
    expect(() => inputToJsonText('X', 'FP32', [NaN])).toThrow(/binary: true/);
    expect(() => inputToJsonText('X', 'BYTES', [Uint8Array.of(0xff)])).toThrow(/not UTF-8/);
  });
  it('reads outputs into the same types as binary', () => {
    expect(outputFromJson('X', 'INT64', [1, 2])).toEqual(BigInt64Array.of(1n, 2n));
    expect(outputFromJson('X', 'BOOL', [true, false])).toEqual(Uint8Array.of(1, 0));
    expect(outputFromJson('X', 'FP32', [[1], [2]])).toEqual(Float32Array.of(1, 2));
    expect(outputFromJson('X', 'BYTES', ['hi'])).toEqual([new TextEncoder().encode('hi')]);
  });
});
