import { describe, expect, it } from 'vitest';
import type { Tensor } from '../tensor/tensor.ts';
import { dimsMatch, reshapeForBatching } from './ensemble-step.ts';

const tensor = (shape: number[]): Tensor => ({
  name: 'T',
  datatype: 'FP32',
  shape,
  data: new Uint8Array(4 * shape.reduce((a, b) => a * b, 1)),
});

describe("reshapeForBatching (Triton's ReshapeTensorDims)", () => {
  it('gives a tensor from a non-batching side a batch dimension of 1 when its shape matches the batching reader', () => {
    expect(reshapeForBatching(tensor([4]), { add: true, dims: [4] }).shape).toEqual([1, 4]);
    expect(reshapeForBatching(tensor([7]), { add: true, dims: [-1] }).shape).toEqual([1, 7]);
  });

  it('leaves a tensor the batching reader would not take as one row: taken as batched already', () => {
    expect(reshapeForBatching(tensor([3, 4]), { add: true, dims: [4] }).shape).toEqual([3, 4]);
  });

  it('takes the batch dimension off a one-row tensor for a non-batching reader whose dims it does not match', () => {
    expect(reshapeForBatching(tensor([1, 4]), { add: false, dims: [4] }).shape).toEqual([4]);
  });

  it('leaves a tensor that matches the non-batching reader, or has more than one row', () => {
    expect(reshapeForBatching(tensor([1, 4]), { add: false, dims: [1, 4] }).shape).toEqual([1, 4]);
    expect(reshapeForBatching(tensor([1, 4]), { add: false, dims: [-1, 4] }).shape).toEqual([1, 4]);
    expect(reshapeForBatching(tensor([2, 4]), { add: false, dims: [4] }).shape).toEqual([2, 4]);
  });

  it('keeps the bytes and passes a tensor unchanged where no reshape was decided', () => {
    const t = tensor([1, 4]);
    expect(reshapeForBatching(t, { add: false, dims: [4] }).data).toBe(t.data);
    expect(reshapeForBatching(t, undefined)).toBe(t);
  });
});

describe('dimsMatch', () => {
  it('needs as many dimensions, each equal or -1 on either side', () => {
    expect(dimsMatch([2, -1], [2, 9])).toBe(true);
    expect(dimsMatch([-1, 3], [5, -1])).toBe(true);
    expect(dimsMatch([2, 3], [2, 4])).toBe(false);
    expect(dimsMatch([4], [1, 4])).toBe(false);
  });
});
