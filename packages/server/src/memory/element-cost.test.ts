import { describe, expect, it } from 'vitest';
import { serializeBytesElements } from '../tensor/bytes-codec.ts';
import { STRING_CONTENT_BYTES_PER_BYTE, STRING_ELEMENT_BYTES, stringHeapBytes, stringHeapCapacityBytes } from './element-cost.ts';
import { requestChargeBytes } from './request-charge.ts';

describe('per-element costs', () => {
  it('a BYTES request is charged its strings in the worker, inputs and outputs, beyond its bytes', () => {
    const model = {
      maxBatchSize: 8,
      inputs: [{ datatype: 'BYTES' as const, dims: [-1] }],
      outputs: [{ name: 'OUT', datatype: 'BYTES' as const, dims: [-1] }],
    };
    const data = serializeBytesElements(Array(1000).fill('ab'));
    const charge = requestChargeBytes(
      model,
      { inputs: [{ name: 'IN', datatype: 'BYTES', shape: [1, 1000], data }], batchSize: 1, outputNames: ['OUT'] },
      undefined,
    );
    // Inputs 6000 bytes; the output estimated at 36 bytes per element, sent binary; strings both ways.
    const output = 36_000;
    const strings = 1000 * STRING_ELEMENT_BYTES * 2 + (2000 + (output - 4000)) * STRING_CONTENT_BYTES_PER_BYTE;
    expect(charge).toBe(6000 + output * 2 + strings);
  });

  it("the worker's heap for strings: a batch may take half the instance's limit", () => {
    expect(stringHeapBytes(1000, 2000)).toBe(2 * (1000 * 32 + 2000 * 2));
    expect(stringHeapCapacityBytes(100 * 2 ** 20)).toBe(50 * 2 ** 20);
    expect(stringHeapCapacityBytes(undefined)).toBe(Infinity);
  });
});
