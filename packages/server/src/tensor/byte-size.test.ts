import { describe, expect, it } from 'vitest';
import { InferenceServerError } from '../errors/errors.ts';
import { checkedElementCount, expectedByteSize, MAX_TENSOR_BYTE_SIZE, validateShape } from './byte-size.ts';

function errorOf(f: () => unknown): InferenceServerError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(InferenceServerError);
    return e as InferenceServerError;
  }
  throw new Error('expected an error');
}

describe('validateShape', () => {
  it('accepts non-negative integers, scalars and zero dims', () => {
    expect(validateShape([1, 16], 'X')).toEqual([1, 16]);
    expect(validateShape([], 'X')).toEqual([]);
    expect(validateShape([0, 3], 'X')).toEqual([0, 3]);
  });

  it.each([
    [[1, -16], /'IN'.*dimension 1 must be a non-negative integer, got -16/],
    [[1.5], /'IN'.*dimension 0 must be a non-negative integer, got 1.5/],
    [['4'], /'IN'.*dimension 0 must be a non-negative integer, got "4"/],
    [[null], /'IN'.*got null/],
    [[[2]], /'IN'.*got an array/],
    [[NaN], /'IN'.*got NaN/],
    [[Infinity], /'IN'.*got Infinity/],
    [[1, 2 ** 52], /'IN'.*dimension 1 \(4503599627370496\) causes total element count to exceed maximum size of 2147483648/],
    ['[1,2]', /shape of tensor 'IN' must be an array/],
    [{ length: 1 }, /shape of tensor 'IN' must be an array/],
    [new Array(65).fill(1), /'IN' has 65 dimensions; at most 64/],
  ])('refuses %j', (shape, message) => {
    const error = errorOf(() => validateShape(shape, 'IN'));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toMatch(message);
  });
});

describe('validateShape with dimensions beyond 2^53 (bigints from the exact JSON parse)', () => {
  it("calls a positive one too large, in Triton's words, and a negative one negative", () => {
    expect(errorOf(() => validateShape([16, 2n ** 60n + 2n], 'IN')).message).toBe(
      "shape of tensor 'IN': dimension 1 (1152921504606846978) causes total element count to exceed maximum size of 2147483648",
    );
    expect(errorOf(() => validateShape([-(2n ** 60n)], 'IN')).message).toMatch(
      /'IN'.*dimension 0 must be a non-negative integer, got -1152921504606846976/,
    );
  });
});

describe('expectedByteSize', () => {
  it('multiplies the element count by the element size', () => {
    expect(expectedByteSize('FP32', [2, 3], 'X')).toBe(24);
    expect(expectedByteSize('BOOL', [5], 'X')).toBe(5);
    expect(expectedByteSize('INT64', [], 'X')).toBe(8);
    expect(expectedByteSize('FP16', [0, 2 ** 31], 'X')).toBe(0);
  });

  it('accepts exactly the limit and refuses one byte beyond it', () => {
    expect(expectedByteSize('UINT8', [2 ** 31], 'X')).toBe(MAX_TENSOR_BYTE_SIZE);
    expect(errorOf(() => expectedByteSize('FP16', [2 ** 30 + 1], 'BIG')).message).toMatch(
      /byte size overflow for input 'BIG': datatype FP16 and shape \[1073741825\] would take 2147483650 bytes; the limit is 2147483648/,
    );
  });

  it('refuses element counts that overflow, without losing precision or reaching Infinity', () => {
    const error = errorOf(() => expectedByteSize('INT32', [65536, 65536, 65536], 'INPUT1'));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toBe(
      "shape [65536,65536,65536] of tensor 'INPUT1' causes total element count to exceed maximum size of 2147483648",
    );
    expect(() => checkedElementCount(new Array(64).fill(2 ** 31), 'X')).toThrow(/causes total element count to exceed maximum size of/);
    expect(checkedElementCount([...new Array(63).fill(2 ** 31), 0], 'X')).toBe(0);
  });
});
