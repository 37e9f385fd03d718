import { describe, expect, it } from 'vitest';
import type { Tensor } from '../tensor/tensor.ts';
import { parseCacheConfigFlags, ResponseCache } from './response-cache.ts';

const tensor = (bytes: number[], shape = [1, bytes.length / 4]): Tensor => ({
  name: 'INPUT0',
  datatype: 'FP32',
  shape,
  data: Uint8Array.from(bytes),
});

describe('ResponseCache', () => {
  it('keys on model, version, every input byte and shape, and the outputs asked for', () => {
    const cache = new ResponseCache(1 << 20);
    const base = cache.keyOf('m', '1', [tensor([1, 2, 3, 4])], [{ name: 'OUT' }]);
    expect(cache.keyOf('m', '1', [tensor([1, 2, 3, 4])], [{ name: 'OUT' }])).toBe(base);
    for (const other of [
      cache.keyOf('n', '1', [tensor([1, 2, 3, 4])], [{ name: 'OUT' }]),
      cache.keyOf('m', '2', [tensor([1, 2, 3, 4])], [{ name: 'OUT' }]),
      cache.keyOf('m', '1', [tensor([1, 2, 3, 5])], [{ name: 'OUT' }]),
      cache.keyOf('m', '1', [tensor([1, 2, 3, 4], [1, 1, 1])], [{ name: 'OUT' }]),
      cache.keyOf('m', '1', [tensor([1, 2, 3, 4])], [{ name: 'OUT', classification: 1 }]),
      cache.keyOf('m', '1', [tensor([1, 2, 3, 4])], []),
    ]) {
      expect(other).not.toBe(base);
    }
  });

  it('stores copies, so a cached entry neither changes with nor holds on to the batch buffer', () => {
    const cache = new ResponseCache(1 << 20);
    const batch = new Uint8Array(1024);
    batch.set([9, 9, 9, 9], 8);
    const output: Tensor = { name: 'OUT', datatype: 'FP32', shape: [1, 1], data: batch.subarray(8, 12) };
    cache.set('k', [output]);
    batch.fill(0);
    const cached = cache.get('k')!;
    expect([...cached[0]!.data]).toEqual([9, 9, 9, 9]);
    expect(cached[0]!.data.buffer.byteLength).toBe(4);
  });

  it('evicts the least recently used entries once its size is reached', () => {
    const entry = (): Tensor[] => [{ name: 'OUT', datatype: 'UINT8', shape: [1000], data: new Uint8Array(1000) }];
    const cache = new ResponseCache(3000); // each entry costs 1000 bytes + overhead: two fit
    cache.set('a', entry());
    cache.set('b', entry());
    cache.get('a');
    cache.set('c', entry());
    expect(cache.get('a')).toBeDefined();
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('c')).toBeDefined();
    expect(cache.entryCount).toBe(2);
    expect(cache.evictionCount).toBe(1);
    expect(cache.utilization).toBeGreaterThan(0.6);
    cache.set('huge', [{ name: 'OUT', datatype: 'UINT8', shape: [5000], data: new Uint8Array(5000) }]);
    expect(cache.get('huge')).toBeUndefined();
  });
});

describe('parseCacheConfigFlags', () => {
  it("reads Triton's local cache flag and refuses other caches", () => {
    expect(parseCacheConfigFlags([])).toBeUndefined();
    expect(parseCacheConfigFlags(['local,size=1048576'])).toEqual({ sizeBytes: 1048576 });
    expect(() => parseCacheConfigFlags(['redis,host=localhost'])).toThrow(/the local cache is the only one/);
    expect(() => parseCacheConfigFlags(['local,size=lots'])).toThrow(/positive number of bytes/);
    expect(() => parseCacheConfigFlags(['local,ttl=5'])).toThrow(/supports only size/);
  });
});
