import { describe, expect, it } from 'vitest';
import { halfBits, tensor } from './tensor.ts';
import { inferModel } from './infer-model.ts';
import { ModelError } from './errors.ts';

describe('tensor', () => {
  it('converts plain arrays to the datatype’s own array', () => {
    expect(tensor('a', 'FP32', [2], [1.5, 2]).data).toEqual(new Float32Array([1.5, 2]));
    expect(tensor('a', 'INT64', [2], [1, 2n]).data).toEqual(new BigInt64Array([1n, 2n]));
    expect(tensor('a', 'BOOL', [3], [true, 0, 1]).data).toEqual(new Uint8Array([1, 0, 1]));
    expect(tensor('a', 'BYTES', [2], ['hé', new Uint8Array([1])]).data).toEqual([Buffer.from('hé'), Buffer.from([1])]);
    expect(tensor('a', 'FP16', [3], [1, -2, 0.5]).data).toEqual(new Uint16Array([0x3c00, 0xc000, 0x3800]));
  });

  it('refuses a count that does not match the shape, and a typed array of another datatype', () => {
    expect(() => tensor('a', 'FP32', [2, 2], [1, 2, 3])).toThrow("tensor 'a': shape [2,2] holds 4 elements, but 3 were given");
    expect(() => tensor('a', 'FP32', [1], new Float64Array(1))).toThrow('FP32 data must be a Float32Array, got Float64Array');
    expect(() => tensor('a', 'BYTES', [1], new Uint8Array(1))).toThrow('BYTES data is one Buffer');
  });

  it('rounds half precision to nearest even, with infinities and subnormals', () => {
    expect(halfBits(65504)).toBe(0x7bff);
    expect(halfBits(1e6)).toBe(0x7c00);
    expect(halfBits(2 ** -24)).toBe(0x0001);
    expect(halfBits(Number.NaN) & 0x7c00).toBe(0x7c00);
  });
});

describe('inferModel', () => {
  it('outside the server is an UNAVAILABLE ModelError', async () => {
    const error = await inferModel({ model: 'm', inputs: [] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as ModelError).code).toBe('UNAVAILABLE');
  });
});
