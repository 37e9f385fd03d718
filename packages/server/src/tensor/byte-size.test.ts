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
    expect(validateShape([1, 16], 'X', 'FP32')).toEqual([1, 16]);
    expect(validateShape([], 'X', 'FP32')).toEqual([]);
    expect(validateShape([0, 3], 'X', 'FP32')).toEqual([0, 3]);
    expect(validateShape([0, 2 ** 31], 'X', 'BYTES')).toEqual([0, 2 ** 31]);
  });

  it.each([
    [[1, -16], /'IN'.*dimension 1 must be a non-negative integer, got -16/],
    [[1.5], /'IN'.*dimension 0 must be a non-negative integer, got 1.5/],
    [['4'], /'IN'.*dimension 0 must be a non-negative integer, got "4"/],
    [[null], /'IN'.*got null/],
    [[[2]], /'IN'.*got an array/],
    [[NaN], /'IN'.*got NaN/],
    [[Infinity], /'IN'.*got Infinity/],
    [[1, 2 ** 52], /^shape \[1,4503599627370496\] of tensor 'IN' has more elements than the 2147483648 one tensor may have$/],
    [[2 ** 52, 0], /^shape of tensor 'IN': dimension 0 \(4503599627370496\) is larger than the 2147483648 elements one tensor may have$/],
    ['[1,2]', /shape of tensor 'IN' must be an array/],
    [{ length: 1 }, /shape of tensor 'IN' must be an array/],
    [new Array(65).fill(1), /'IN' has 65 dimensions; at most 64/],
  ])('refuses %j', (shape, message) => {
    const error = errorOf(() => validateShape(shape, 'IN', 'FP32'));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toMatch(message);
  });
});

describe('validateShape counts exactly (dimensions beyond 2^53 arrive as bigints), as Triton does', () => {
  const big = 2n ** 60n + 2n;
  it("refuses an element count past INT64_MAX in Triton's words (http_test.py test_buffer_size_overflow, payload 1)", () => {
    const error = errorOf(() => validateShape([16, big], 'INPUT0', 'FP32'));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toBe(
      "invalid shape for input 'INPUT0': shape [16,1152921504606846978] causes total element count to exceed maximum size of 9223372036854775807",
    );
    // However many dimensions it takes, and past 2^64 (where C++ would wrap).
    expect(errorOf(() => validateShape(new Array(64).fill(2 ** 31), 'X', 'BYTES')).message).toMatch(/causes total element count/);
    expect(errorOf(() => validateShape([2n ** 64n + 5n], 'X', 'UINT8')).message).toMatch(/causes total element count/);
    expect(errorOf(() => validateShape([2n ** 63n], 'X', 'UINT8')).message).toMatch(/causes total element count/);
  });

  it("refuses a byte size past INT64_MAX, elements within it, in Triton's words (payload 2)", () => {
    const error = errorOf(() => validateShape([4, big], 'INPUT0', 'FP32'));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toBe(
      "byte size overflow for input 'INPUT0': element count (4611686018427387912) * data type size (4) exceeds maximum allowed size (9223372036854775807)",
    );
    // One-byte elements and BYTES (no byte size in Triton's check) stay within: our own limit refuses them.
    for (const datatype of ['UINT8', 'BYTES'] as const) {
      expect(errorOf(() => validateShape([4, big], 'INPUT0', datatype)).message).toBe(
        "shape [4,1152921504606846978] of tensor 'INPUT0' has more elements than the 2147483648 one tensor may have",
      );
    }
  });

  it('refuses within INT64_MAX but past our own limit, naming the tensor and the limit', () => {
    expect(errorOf(() => validateShape([2n ** 60n], 'IN', 'INT8')).message).toBe(
      "shape [1152921504606846976] of tensor 'IN' has more elements than the 2147483648 one tensor may have",
    );
    expect(errorOf(() => validateShape([2 ** 30 + 1], 'IN', 'FP16')).message).toBe(
      "tensor 'IN' of datatype FP16 and shape [1073741825] would take 2147483650 bytes, more than the 2147483648 one tensor may take",
    );
    expect(validateShape([2 ** 30], 'IN', 'FP16')).toEqual([2 ** 30]);
  });

  it('calls a negative bigint negative', () => {
    expect(errorOf(() => validateShape([-(2n ** 60n)], 'IN', 'FP32')).message).toMatch(
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
    expect(errorOf(() => expectedByteSize('FP16', [2 ** 30 + 1], 'BIG')).message).toBe(
      "tensor 'BIG' of datatype FP16 and shape [1073741825] would take 2147483650 bytes, more than the 2147483648 one tensor may take",
    );
  });

  it('refuses element counts past the limit, without losing precision or reaching Infinity', () => {
    const error = errorOf(() => expectedByteSize('INT32', [65536, 65536, 65536], 'INPUT1'));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toBe("shape [65536,65536,65536] of tensor 'INPUT1' has more elements than the 2147483648 one tensor may have");
    expect(() => checkedElementCount(new Array(64).fill(2 ** 31), 'X')).toThrow(/has more elements than the 2147483648/);
    expect(checkedElementCount([...new Array(63).fill(2 ** 31), 0], 'X')).toBe(0);
  });
});
