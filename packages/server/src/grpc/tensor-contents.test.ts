import { describe, expect, it } from 'vitest';
import { InferenceServerError } from '../core/index.ts';
import type { DataType } from '../tensor/datatype.ts';
import { contentsToRaw, hasContents } from './tensor-contents.ts';
import { wireContents } from '../../test-support/grpc-wire.ts';
import type { InferTensorContentsWire } from './wire-types.ts';

const le = (view: ArrayBufferView) => [...new Uint8Array(view.buffer, view.byteOffset, view.byteLength)];

describe('contentsToRaw', () => {
  const cases: [DataType, InferTensorContentsWire, number[]][] = [
    ['BOOL', { bool_contents: [true, false, true] }, [1, 0, 1]],
    ['UINT8', { uint_contents: [0, 255] }, [0, 255]],
    ['UINT16', { uint_contents: [1, 0xfffe] }, le(Uint16Array.of(1, 0xfffe))],
    ['UINT32', { uint_contents: [0xffffffff] }, [255, 255, 255, 255]],
    ['INT8', { int_contents: [-128, 127] }, [0x80, 0x7f]],
    ['INT16', { int_contents: [-2, 300] }, le(Int16Array.of(-2, 300))],
    ['INT32', { int_contents: [-1, 7] }, le(Int32Array.of(-1, 7))],
    ['INT64', { int64_contents: ['-9223372036854775808', 5] }, le(BigInt64Array.of(-(2n ** 63n), 5n))],
    ['UINT64', { uint64_contents: ['18446744073709551615'] }, le(BigUint64Array.of(2n ** 64n - 1n))],
    ['FP32', { fp32_contents: [1.5, -0] }, le(Float32Array.of(1.5, -0))],
    ['FP64', { fp64_contents: [Math.PI] }, le(Float64Array.of(Math.PI))],
  ];
  it.each(cases)('%s', (datatype, contents, expected) => {
    expect([...contentsToRaw('IN', datatype, wireContents(contents))]).toEqual(expected);
  });

  it('BYTES becomes 4-byte little-endian length-prefixed elements', () => {
    const raw = contentsToRaw('IN', 'BYTES', wireContents({ bytes_contents: [Buffer.from('hi'), new Uint8Array(0), Buffer.from([0xff])] }));
    expect([...raw]).toEqual([2, 0, 0, 0, 104, 105, 0, 0, 0, 0, 1, 0, 0, 0, 0xff]);
  });

  it('values land at 64-bit precision beyond 2^53', () => {
    const raw = contentsToRaw('IN', 'INT64', wireContents({ int64_contents: ['9007199254740993'] }));
    expect(new BigInt64Array(raw.slice().buffer)[0]).toBe(9007199254740993n);
  });

  it.each(['FP16', 'BF16'] as const)('%s has no typed field: only raw', (datatype) => {
    expect(() => contentsToRaw('IN', datatype, wireContents({ fp32_contents: [1] }))).toThrow(/must be sent in raw_input_contents/);
  });

  it('rejects elements in the field of another datatype, naming both', () => {
    const call = () => contentsToRaw('IN', 'INT32', wireContents({ fp32_contents: [1] }));
    expect(call).toThrow(InferenceServerError);
    expect(call).toThrow("input 'IN' of datatype INT32 has data in 'fp32_contents'; INT32 elements belong in 'int_contents'");
  });

  it.each<[DataType, InferTensorContentsWire]>([
    ['UINT8', { uint_contents: [256] }],
    ['UINT16', { uint_contents: [65536] }],
    ['INT8', { int_contents: [128] }],
    ['INT16', { int_contents: [-32769] }],
  ])('rejects %s values out of range', (datatype, contents) => {
    expect(() => contentsToRaw('IN', datatype, wireContents(contents))).toThrow(/outside the range/);
  });

  it('hasContents', () => {
    expect(hasContents(undefined)).toBe(false);
    expect(hasContents(wireContents({ bool_contents: [], fp32_contents: [] }))).toBe(false);
    expect(hasContents(wireContents({ bytes_contents: [new Uint8Array(0)] }))).toBe(true);
  });
});
