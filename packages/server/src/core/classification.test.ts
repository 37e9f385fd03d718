import { describe, expect, it } from 'vitest';
import { bytesElementsToStrings } from '../tensor/bytes-codec.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { classificationCount, classify } from './classification.ts';

const bytesOf = (view: ArrayBufferView) => new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
const strings = (t: Tensor) => bytesElementsToStrings(t.data, t.name);

describe('classify', () => {
  it('returns the top k per batch item, best first, with labels where there are', () => {
    const scores: Tensor = { name: 'P', datatype: 'FP32', shape: [2, 4], data: bytesOf(Float32Array.of(0.1, 0.7, 0.2, 0.5, 3, 1, 2, 0)) };
    const result = classify(scores, 2, ['cat', 'dog', '', 'bird'], true);
    expect(result).toMatchObject({ name: 'P', datatype: 'BYTES', shape: [2, 2] });
    expect(strings(result)).toEqual(['0.700000:1:dog', '0.500000:3:bird', '3.000000:0:cat', '2.000000:2']);
  });

  it('keeps the lower index first on ties, clamps k to the classes, and writes integers exactly', () => {
    const scores: Tensor = { name: 'P', datatype: 'INT64', shape: [3], data: bytesOf(BigInt64Array.of(5n, 9007199254740993n, 5n)) };
    const result = classify(scores, 10, undefined, false);
    expect(result.shape).toEqual([3]);
    expect(strings(result)).toEqual(['9007199254740993:1', '5:0', '5:2']);
  });

  it('reads FP16 and BF16 scores, and ranks NaN last', () => {
    const fp16: Tensor = { name: 'H', datatype: 'FP16', shape: [1, 3], data: bytesOf(Uint16Array.of(0x3c00, 0xc000, 0x7e00)) };
    expect(strings(classify(fp16, 3, undefined, true))).toEqual(['1.000000:0', '-2.000000:1', 'NaN:2']);
    const bf16: Tensor = { name: 'B', datatype: 'BF16', shape: [2], data: bytesOf(Uint16Array.of(0x3f80, 0x4040)) };
    expect(strings(classify(bf16, 1, undefined, false))).toEqual(['3.000000:1']);
  });

  it('refuses non-numeric outputs and counts that are not positive integers', () => {
    expect(() => classify({ name: 'S', datatype: 'BYTES', shape: [0], data: new Uint8Array(0) }, 1, undefined, false)).toThrow(
      /needs numeric scores/,
    );
    expect(classificationCount(3, 'P')).toBe(3);
    for (const bad of [0, -1, 1.5, '3', true])
      expect(() => classificationCount(bad, 'P')).toThrow(/classification of output 'P' must be a positive integer/);
  });
});
