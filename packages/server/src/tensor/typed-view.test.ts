import { describe, expect, it } from 'vitest';
import { InferenceServerError } from '../errors/errors.ts';
import { SAMPLES, unaligned } from '../../test-support/tensor-samples.ts';
import { tensorFromTypedArray, typedArrayOf } from './typed-view.ts';

describe('typedArrayOf', () => {
  it('is a zero-copy view when the data is aligned', () => {
    const backing = new ArrayBuffer(64);
    const data = new Uint8Array(backing, 8, 24);
    new Float32Array(backing, 8, 6).set([1, 2, 3, 4, 5, 6]);
    const view = typedArrayOf({ name: 'X', datatype: 'FP32', shape: [2, 3], data });
    expect(view).toBeInstanceOf(Float32Array);
    expect(view.buffer).toBe(backing);
    expect([...view]).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('copies once when the data is not aligned, with the same values', () => {
    for (const sample of SAMPLES) {
      if (sample.datatype === 'BYTES') continue;
      const data = unaligned(sample.bytes);
      const view = typedArrayOf({ name: 'X', datatype: sample.datatype, shape: sample.shape, data });
      const expected = typedArrayOf({ name: 'X', datatype: sample.datatype, shape: sample.shape, data: sample.bytes });
      expect(view.length, sample.datatype).toBe(6);
      expect([...view], sample.datatype).toEqual([...expected]);
      if (view.BYTES_PER_ELEMENT > 1) expect(view.buffer).not.toBe(data.buffer);
      else expect(view.buffer).toBe(data.buffer);
    }
  });

  it('refuses a byte length that is not a multiple of the element size, naming the tensor', () => {
    expect(() => typedArrayOf({ name: 'ODD', datatype: 'INT32', shape: [1], data: new Uint8Array(6) })).toThrow(
      /tensor 'ODD' of datatype INT32 has 6 bytes, not a multiple of 4/,
    );
    expect(() => typedArrayOf({ name: 'S', datatype: 'BYTES', shape: [1], data: new Uint8Array(4) })).toThrow(InferenceServerError);
  });
});

describe('tensorFromTypedArray', () => {
  it('wraps the array bytes without copying', () => {
    const array = new BigInt64Array([1n, -2n, 3n, 4n]).subarray(1);
    const tensor = tensorFromTypedArray('Y', 'INT64', [3], array);
    expect(tensor.data.buffer).toBe(array.buffer);
    expect(tensor.data.byteOffset).toBe(8);
    expect(tensor.data.byteLength).toBe(24);
    expect([...(typedArrayOf(tensor) as BigInt64Array)]).toEqual([-2n, 3n, 4n]);
  });

  it('refuses the wrong array type or element count, naming the tensor', () => {
    expect(() => tensorFromTypedArray('Y', 'FP32', [2], new Float64Array(2))).toThrow(
      /'Y' of datatype FP32 needs a Float32Array, got a Float64Array/,
    );
    expect(() => tensorFromTypedArray('Y', 'FP16', [3], new Uint16Array(2))).toThrow(/'Y' of shape \[3\] needs 3 elements, got 2/);
  });
});
