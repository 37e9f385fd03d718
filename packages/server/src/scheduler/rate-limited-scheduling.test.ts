import { describe, expect, it } from 'vitest';
import { FakeClock, schedulerHarness } from '../../test-support/scheduler.ts';
import { RateLimiter } from './rate-limiter.ts';

/** Two models, one instance each, sharing one resource of count 1 on device 0. */
function twoModels(b: Parameters<typeof schedulerHarness>[0] = {}) {
  const clock = new FakeClock();
  const limiter = new RateLimiter([], clock);
  const claim = [{ deviceId: 0, resources: [{ name: 'gpu', global: false, count: 1 }], priority: 1 }];
  const a = schedulerHarness({ dynamic_batching: {} }, { clock, gate: limiter.register('a', '1', claim) });
  const bModel = schedulerHarness({ dynamic_batching: {}, ...b }, { clock, gate: limiter.register('b', '1', claim) });
  return { clock, limiter, a, b: bModel };
}

describe('a scheduler behind the rate limiter', () => {
  it('waits for the resource, and the batch forms when the grant comes, with what arrived meanwhile', async () => {
    const { a, b, limiter, clock } = twoModels();
    void a.send('a1', [1]);
    await a.flush();
    expect(a.models[0]!.batches).toEqual([[1]]);
    void b.send('b1', [2]);
    await b.flush();
    expect(b.models[0]!.batches).toEqual([]);
    expect(limiter.waiting).toBe(1);
    expect(await b.pendingGauge()).toBe(1); // a batch waiting for resources is pending
    clock.advanceMs(3);
    void b.send('b2', [3]);
    void a.send('a2', [4]);
    await b.flush();
    a.models[0]!.finish();
    await b.flush();
    // b's batch took both requests that waited; a's next request waits behind it.
    expect(b.models[0]!.batches).toEqual([[2, 3]]);
    expect(a.models[0]!.batches).toEqual([[1]]);
    expect(b.stats.snapshot().batchwise_rate_limiter_wait).toEqual({ count: 1, ns: 3_000_000 });
    expect(a.stats.snapshot().batchwise_rate_limiter_wait).toEqual({ count: 1, ns: 0 }); // granted at once
    b.models[0]!.finish();
    await a.flush();
    expect(a.models[0]!.batches).toEqual([[1], [4]]);
    a.models[0]!.finish();
    await a.flush();
    expect(a.settled.map((s) => s.name)).toEqual(['a1', 'a2']);
    expect(b.settled.map((s) => s.name)).toEqual(['b1', 'b2']);
    expect(limiter.resourceCounts()[0]!.inUse).toBe(0);
  });

  it("fires a request's queue timeout while its batch waits for resources, and gives up the wait", async () => {
    const { a, b, limiter, clock } = twoModels({
      dynamic_batching: { default_queue_policy: { timeout_action: 'REJECT', default_timeout_microseconds: 2000 } },
    });
    void a.send('a1', [1]);
    await a.flush();
    void b.send('b1', [2]);
    await b.flush();
    expect(limiter.waiting).toBe(1);
    clock.advanceMs(2);
    await b.flush();
    expect(b.settled).toEqual([{ name: 'b1', value: 'UNAVAILABLE: Request timeout expired', at: 2_000_000n }]);
    expect(limiter.waiting).toBe(0);
    expect(await b.pendingGauge()).toBe(0);
    a.models[0]!.finish();
    await a.flush();
    expect(b.models[0]!.batches).toEqual([]);
    expect(limiter.resourceCounts()[0]!.inUse).toBe(0);
  });

  it('a failed execution gives the resource back', async () => {
    const { a, b, limiter } = twoModels();
    a.models[0]!.failNext = true;
    void a.send('a1', [1]);
    await a.flush();
    void b.send('b1', [2]);
    await b.flush();
    a.models[0]!.finish();
    await a.flush();
    expect(a.settled[0]!.value).toMatch(/boom/);
    expect(b.models[0]!.batches).toEqual([[2]]);
    b.models[0]!.finish();
    await b.flush();
    expect(limiter.resourceCounts()[0]!.inUse).toBe(0);
  });

  it("an unloaded version's hold goes to the next waiter", async () => {
    const { a, b } = twoModels();
    void a.send('a1', [1]);
    await a.flush();
    void b.send('b1', [2]);
    await b.flush();
    a.scheduler.close();
    await b.flush();
    expect(b.models[0]!.batches).toEqual([[2]]);
  });

  it('a DELAY request timed out while its batch waits goes behind the requests still in time', async () => {
    const { a, b, clock } = twoModels({
      max_batch_size: 1,
      dynamic_batching: { default_queue_policy: { timeout_action: 'DELAY', default_timeout_microseconds: 1000 } },
    });
    void a.send('a1', [1]);
    await a.flush();
    void b.send('late', [2]);
    await b.flush();
    clock.advanceMs(1);
    void b.send('fresh', [3]);
    await b.flush();
    a.models[0]!.finish();
    await b.flush();
    expect(b.models[0]!.batches).toEqual([[3]]);
    b.models[0]!.finish();
    await b.flush();
    expect(b.models[0]!.batches).toEqual([[3], [2]]);
  });
});

describe('a latency objective behind the rate limiter', () => {
  /**
   * Model b has a 10 ms objective and a profile from warmup (t(1) = 2 ms); both share one resource
   * of count 1, which a's running batch holds while b's request waits for it.
   */
  async function bWaitsBehindA() {
    const clock = new FakeClock();
    const limiter = new RateLimiter([], clock);
    const claim = [{ deviceId: 0, resources: [{ name: 'gpu', global: false, count: 1 }], priority: 1 }];
    const a = schedulerHarness({ dynamic_batching: {} }, { clock, gate: limiter.register('a', '1', claim) });
    const b = schedulerHarness(
      { dynamic_batching: {}, parameters: { batchwise_latency_objective_ms: { string_value: '10' } } },
      { clock, gate: limiter.register('b', '1', claim), warmupRuns: [{ instance: 0, batchSize: 1, ns: 2_000_000 }] },
    );
    void a.send('a1', [1]);
    await a.flush();
    void b.send('b1', [2]);
    await b.flush();
    expect(limiter.waiting).toBe(1);
    return { clock, limiter, a, b };
  }

  it('forms the batch by the objective when the grant comes', async () => {
    const { a, b, clock, limiter } = await bWaitsBehindA();
    clock.advanceMs(3);
    a.models[0]!.finish();
    await b.flush();
    expect(b.models[0]!.batches).toEqual([[2]]);
    expect(b.stats.snapshot().batchwise_latency_objective!.target_batch_size).toBe(1);
    b.models[0]!.finish();
    await b.flush();
    expect(b.settled.map((s) => s.name)).toEqual(['b1']);
    expect(limiter.resourceCounts()[0]!.inUse).toBe(0);
  });

  it('refuses a request whose wait for resources outlasts the objective, and gives the wait up', async () => {
    const { a, b, clock, limiter } = await bWaitsBehindA();
    // At 10 - t(1) = 8 ms it can no longer finish in time even if it ran at once: it leaves, and the wait is given up.
    clock.advanceMs(8);
    await b.flush();
    expect(limiter.waiting).toBe(0);
    clock.advanceMs(2); // refused at its deadline
    await b.flush();
    expect(b.settled).toEqual([
      { name: 'b1', value: "UNAVAILABLE: request would miss the latency objective of 10 ms for model 'm'", at: 10_000_000n },
    ]);
    expect(b.models[0]!.batches).toEqual([]);
    a.models[0]!.finish();
    await a.flush();
    expect(limiter.resourceCounts()[0]!.inUse).toBe(0);
  });
});
