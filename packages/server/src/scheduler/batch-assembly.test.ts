import { describe, expect, it } from 'vitest';
import { serializeBytesElements, bytesElementsToStrings } from '../tensor/bytes-codec.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { assembleBatch, splitOutputs } from './batch-assembly.ts';

const fp32 = (name: string, rows: number, values: number[]): Tensor => ({
  name,
  datatype: 'FP32',
  shape: [rows, values.length / rows],
  data: new Uint8Array(Float32Array.from(values).buffer),
});
const text = (name: string, rows: number, values: string[]): Tensor => ({
  name,
  datatype: 'BYTES',
  shape: [rows, values.length / rows],
  data: serializeBytesElements(values),
});
const floats = (t: Tensor) => Array.from(new Float32Array(t.data.slice().buffer));

describe('assembleBatch', () => {
  it('copies each input of every request into one buffer per input, rows summed', () => {
    const batch = assembleBatch(
      [
        [fp32('A', 1, [1, 2]), text('B', 1, ['x'])],
        [fp32('A', 2, [3, 4, 5, 6]), text('B', 2, ['yy', ''])],
      ],
      [1, 2],
    );
    expect(batch[0]!.shape).toEqual([3, 2]);
    expect(floats(batch[0]!)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(batch[0]!.data.byteLength).toBe(batch[0]!.data.buffer.byteLength);
    expect(batch[1]!.shape).toEqual([3, 1]);
    expect(bytesElementsToStrings(batch[1]!.data, 'B')).toEqual(['x', 'yy', '']);
  });

  it('copies a batch of one too, so the backend may transfer the buffer without detaching the caller’s', () => {
    const body = new Uint8Array(64);
    const input: Tensor = { name: 'A', datatype: 'FP32', shape: [1, 4], data: body.subarray(16, 32) };
    const [batched] = assembleBatch([[input]], [1]);
    expect(batched!.data.buffer).not.toBe(body.buffer);
    expect(batched!.data.byteLength).toBe(16);
    expect(batched!.data.buffer.byteLength).toBe(16);
  });

  it('keeps the shape of a lone request: a model without batching has no batch dimension to rewrite', () => {
    const image = { name: 'IMAGE', datatype: 'FP32', shape: [3, 2, 2], data: new Uint8Array(48) } satisfies Tensor;
    const words = text('WORDS', 1, ['a', 'bb', 'ccc']);
    const [batchedImage, batchedWords] = assembleBatch([[image, { ...words, shape: [3] }]], [1]);
    expect(batchedImage!.shape).toEqual([3, 2, 2]);
    expect(batchedImage!.data.byteLength).toBe(48);
    expect(batchedWords!.shape).toEqual([3]);
    expect(bytesElementsToStrings(batchedWords!.data, 'WORDS')).toEqual(['a', 'bb', 'ccc']);
  });
});

describe('splitOutputs', () => {
  it('gives each request its own rows of a fixed-size output, as views', () => {
    const output = fp32('Y', 4, [0, 1, 2, 3, 4, 5, 6, 7]);
    const [a, b] = splitOutputs([output], [1, 3]);
    expect(a![0]!.shape).toEqual([1, 2]);
    expect(floats(a![0]!)).toEqual([0, 1]);
    expect(b![0]!.shape).toEqual([3, 2]);
    expect(floats(b![0]!)).toEqual([2, 3, 4, 5, 6, 7]);
    expect(b![0]!.data.buffer).toBe(output.data.buffer);
  });

  it('splits BYTES outputs at row boundaries found from the length prefixes', () => {
    const output = text('S', 3, ['a', 'bb', '', 'dddd', 'e', 'ff']);
    const [a, b] = splitOutputs([output], [2, 1]);
    expect(a![0]!.shape).toEqual([2, 2]);
    expect(bytesElementsToStrings(a![0]!.data, 'S')).toEqual(['a', 'bb', '', 'dddd']);
    expect(bytesElementsToStrings(b![0]!.data, 'S')).toEqual(['e', 'ff']);
  });

  it('refuses outputs that do not batch along the first dimension or lie about their bytes', () => {
    expect(() => splitOutputs([fp32('Y', 2, [0, 1])], [2, 1])).toThrow(/2 rows for a batch of 3/);
    const short = { ...text('S', 2, ['a', 'b']), shape: [2, 2] };
    expect(() => splitOutputs([short], [1, 1])).toThrow(/does not hold the 4 elements/);
  });
});
