import { describe, expect, it } from 'vitest';
import { encodeFrame, FrameReader } from './frames.ts';

const joined = (parts: Buffer[]) => Buffer.concat(parts);

describe('frames', () => {
  it('round-trips headers and data, small data in one part and large data in its own', () => {
    const small = encodeFrame({ t: 'a', n: 1 }, Uint8Array.of(1, 2, 3));
    expect(small).toHaveLength(1);
    const bigData = new Uint8Array(10_000).fill(7);
    const big = encodeFrame({ t: 'b' }, bigData);
    expect(big).toHaveLength(2);
    expect(big[1]!.buffer).toBe(bigData.buffer); // not copied
    const frames = new FrameReader().push(joined([...small, ...big, ...encodeFrame({ t: 'c' })]));
    expect(frames.map((f) => f.header)).toEqual([{ t: 'a', n: 1 }, { t: 'b' }, { t: 'c' }]);
    expect([...frames[0]!.data]).toEqual([1, 2, 3]);
    expect(frames[1]!.data.equals(Buffer.from(bigData))).toBe(true);
    expect(frames[2]!.data.byteLength).toBe(0);
  });

  it('gives data at an 8-byte aligned address wherever the frame sat in its chunk', () => {
    const stream = joined([...encodeFrame({ t: 'odd' }), ...encodeFrame({ t: 'x' }, Uint8Array.of(1, 2, 3, 4))]);
    const frames = new FrameReader().push(stream);
    expect(frames[1]!.data.byteOffset % 8).toBe(0);
    expect(new Int32Array(frames[1]!.data.buffer, frames[1]!.data.byteOffset, 1)[0]).toBe(0x04030201);
  });

  it('reassembles frames cut anywhere, one byte at a time included', () => {
    const stream = joined([...encodeFrame({ t: 'x', s: 'é' }, Uint8Array.of(9, 8)), ...encodeFrame({ t: 'y' })]);
    const reader = new FrameReader();
    const seen: unknown[] = [];
    for (let i = 0; i < stream.length; i++) seen.push(...reader.push(stream.subarray(i, i + 1)).map((f) => [f.header, [...f.data]]));
    expect(seen).toEqual([
      [{ t: 'x', s: 'é' }, [9, 8]],
      [{ t: 'y' }, []],
    ]);
  });
});
