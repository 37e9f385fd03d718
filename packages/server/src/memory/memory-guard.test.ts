import { describe, expect, it } from 'vitest';
import { ServerMetrics } from '../metrics/server-metrics.ts';
import { EXTERNAL_GARBAGE_HEADROOM_BYTES, MemoryGuard, REQUEST_OVERHEAD_BYTES, type HeapReading } from './memory-guard.ts';
import { advanceChargeBytes, requestChargeBytes } from './request-charge.ts';

const MiB = 1024 * 1024;
const O = REQUEST_OVERHEAD_BYTES;
const E = EXTERNAL_GARBAGE_HEADROOM_BYTES;
/** A heap that never grows: these tests are about request accounting. */
const quietHeap = (): HeapReading => ({ youngBytes: 0, youngLimitBytes: 0, otherBytes: 0 });

describe('MemoryGuard', () => {
  it('admits on accounted bytes against budget minus a stable baseline, not on RSS after a burst', () => {
    let rss = 300 * MiB;
    const guard = new MemoryGuard(E + 600 * MiB, new ServerMetrics({ processMetrics: false }), () => rss, quietHeap);
    guard.settle();
    guard.close();
    expect(guard.baselineBytes).toBe(E + 300 * MiB);
    const big = guard.reserve(250 * MiB);
    expect(() => guard.reserve(100 * MiB)).toThrow(/over its memory budget/);
    rss = 900 * MiB; // the allocator keeps what the burst freed
    big.release();
    expect(guard.accountedBytes).toBe(0);
    expect(() => guard.reserve(1024).release()).not.toThrow();
    expect(guard.baselineBytes).toBe(E + 300 * MiB);
  });

  it('spends the advance before charging more, and returns everything once', () => {
    const guard = new MemoryGuard(O + 100, new ServerMetrics({ processMetrics: false }), () => 0, quietHeap);
    const r = guard.reserve(10, 30);
    expect(guard.accountedBytes).toBe(O + 40);
    r.grow(20);
    expect(guard.accountedBytes).toBe(O + 40);
    r.grow(20);
    expect(guard.accountedBytes).toBe(O + 50);
    expect(() => r.grow(60)).toThrow(/over its memory budget/);
    expect(guard.accountedBytes).toBe(O + 50);
    r.release();
    r.release();
    r.grow(10);
    expect(guard.accountedBytes).toBe(0);
  });

  it('counts models and caches held at rest in the baseline until released', () => {
    const guard = new MemoryGuard(O + 100, new ServerMetrics({ processMetrics: false }), () => 10, quietHeap);
    const release = guard.holdAtRest(50);
    expect(guard.freeBytes()).toBe(O + 40);
    expect(() => guard.reserve(41)).toThrow();
    release();
    expect(guard.freeBytes()).toBe(O + 90);
  });

  it('charges every request a fixed overhead beside its tensors', () => {
    const guard = new MemoryGuard(3 * O, new ServerMetrics({ processMetrics: false }), () => 0, quietHeap);
    const a = guard.reserve(0);
    const b = guard.reserve(0);
    expect(guard.accountedBytes).toBe(2 * O);
    expect(() => guard.reserve(O)).toThrow(/over its memory budget/);
    a.release();
    b.release();
    expect(guard.accountedBytes).toBe(0);
  });

  it("reserves the young generation's headroom and room for uncollected Buffers, and follows the other heap spaces' growth", () => {
    let heap: HeapReading = { youngBytes: 1 * MiB, youngLimitBytes: 32 * MiB, otherBytes: 40 * MiB };
    const guard = new MemoryGuard(
      E + 400 * MiB,
      new ServerMetrics({ processMetrics: false }),
      () => 200 * MiB,
      () => heap,
    );
    guard.settle();
    try {
      expect(guard.baselineBytes).toBe(E + 200 * MiB + 31 * MiB);
      // Under load the young generation fills its reserved headroom (not counted twice) and
      // request objects promoted to old space add to the baseline.
      heap = { youngBytes: 32 * MiB, youngLimitBytes: 32 * MiB, otherBytes: 100 * MiB };
      guard.sampleHeap();
      expect(guard.baselineBytes).toBe(E + 200 * MiB + 31 * MiB + 60 * MiB);
      expect(() => guard.reserve(110 * MiB)).toThrow(/over its memory budget/);
      // A full collection hands old space back: so does the baseline.
      heap = { youngBytes: 32 * MiB, youngLimitBytes: 32 * MiB, otherBytes: 30 * MiB };
      guard.sampleHeap();
      expect(guard.baselineBytes).toBe(E + 231 * MiB);
      expect(() => guard.reserve(110 * MiB).release()).not.toThrow();
    } finally {
      guard.close();
    }
  });

  it('reads the real heap: the reserved young headroom stays within V8 limits', () => {
    const guard = new MemoryGuard(4096 * MiB, new ServerMetrics({ processMetrics: false }), () => 100 * MiB);
    guard.settle();
    guard.close();
    expect(guard.baselineBytes).toBeGreaterThanOrEqual(100 * MiB + E);
    expect(guard.baselineBytes).toBeLessThanOrEqual(100 * MiB + 32 * MiB + E);
  });

  it('counts the requests in flight: each request reservation until its release, once; other charges not', () => {
    const guard = new MemoryGuard(100 * MiB, new ServerMetrics({ processMetrics: false }), () => 0, quietHeap);
    const a = guard.reserve(10);
    const b = guard.reserve(10, 5);
    const response = guard.reserve(1000, 0, 0); // a streamed response's charge, not a request
    expect(guard.requestsInFlight).toBe(2);
    a.release();
    a.release();
    expect(guard.requestsInFlight).toBe(1);
    expect(() => guard.reserve(200 * MiB)).toThrow(/over its memory budget/);
    expect(guard.requestsInFlight).toBe(1);
    b.release();
    response.release();
    expect(guard.requestsInFlight).toBe(0);
  });

  it('refuses a budget of 0', () => {
    expect(() => new MemoryGuard(0, new ServerMetrics({ processMetrics: false }))).toThrow(/more than 0/);
  });
});

describe('request charge', () => {
  const model = {
    maxBatchSize: 8,
    inputs: [{ datatype: 'FP32' as const, dims: [-1] }],
    outputs: [
      { name: 'OUT', datatype: 'FP32' as const, dims: [-1] },
      { name: 'CLASS', datatype: 'INT32' as const, dims: [10] },
    ],
  };
  const request = (floats: number, batch = 1) => ({
    inputs: [{ name: 'IN', datatype: 'FP32' as const, shape: [batch, floats], data: new Uint8Array(batch * floats * 4) }],
    batchSize: batch,
    outputNames: ['OUT', 'CLASS'],
  });

  it('counts the batch copy, each output and its binary reply from the config', () => {
    // inputs 4000 + OUT (1000 x 4) x 2 + CLASS (10 x 4) x 2
    expect(requestChargeBytes(model, request(1000), undefined)).toBe(4000 + 8000 + 80);
    expect(requestChargeBytes(model, request(1000, 2), undefined)).toBe(2 * (4000 + 8000 + 80));
  });

  it('charges JSON replies for their text, which costs more than their bytes', () => {
    const json = requestChargeBytes(model, request(1000), () => true);
    // inputs 4000 + raw outputs 4040 + JSON text (1000 x 25 + 10 x 12) x 2 copies
    expect(json).toBe(4000 + 4040 + (25_000 + 120) * 2);
  });

  it('estimates before the body is read from its length and the config', () => {
    expect(advanceChargeBytes(model, 4000, false)).toBeGreaterThanOrEqual(requestChargeBytes(model, request(1000), undefined) - 80);
    expect(advanceChargeBytes(model, 4000, true)).toBeGreaterThan(advanceChargeBytes(model, 4000, false));
  });
});
