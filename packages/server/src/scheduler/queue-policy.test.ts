import { describe, expect, it } from 'vitest';
import { schedulerHarness } from '../../test-support/scheduler.ts';

const levels = (dynamic: Record<string, unknown>) => ({ dynamic_batching: { priority_levels: 2, default_priority_level: 2, ...dynamic } });

describe('priorities', () => {
  it('ignores a request priority when the model has no priority levels, as Triton does', async () => {
    const { send, models, flush, settled } = schedulerHarness({ dynamic_batching: {} });
    void send('a', [1], { priority: 7 });
    await flush();
    expect(settled).toEqual([]);
    expect(models[0]!.batches).toEqual([[1]]);
  });

  it('serves a priority beyond priority_levels at the default level, as Triton does, without failing it', async () => {
    const { send, models, flush, settled, stats, clock } = schedulerHarness({ max_batch_size: 1, ...levels({}) });
    void send('busy', [0]);
    clock.endTurn();
    void send('beyond', [1], { priority: 3 });
    void send('low', [2], { priority: 2 });
    void send('high', [3], { priority: 1 });
    for (let i = 0; i < 4; i++) {
      models[0]!.finish();
      await flush();
    }
    // At level 1 it would run before 'high'; at a level of its own, after 'low'.
    expect(models[0]!.batches).toEqual([[0], [3], [1], [2]]);
    expect(settled.map((s) => s.name)).toEqual(['busy', 'high', 'beyond', 'low']);
    expect(stats.snapshot().inference_stats.fail.count).toBe(0);
  });

  it('DELAY: an expired request moves behind its own level, still ahead of lower levels', async () => {
    const { send, models, clock, flush } = schedulerHarness({
      max_batch_size: 1,
      ...levels({ priority_queue_policy: { '1': { timeout_action: 'DELAY', default_timeout_microseconds: 1000 } } }),
    });
    void send('busy', [0]);
    clock.endTurn();
    void send('late', [1], { priority: 1 });
    clock.advanceMs(2);
    void send('low', [2], { priority: 2 });
    void send('high', [3], { priority: 1 });
    for (let i = 0; i < 4; i++) {
      models[0]!.finish();
      await flush();
    }
    expect(models[0]!.batches).toEqual([[0], [3], [1], [2]]);
  });
});

describe('queue policy', () => {
  it('max_queue_size counts delayed requests too and rejects at once with UNAVAILABLE (503)', async () => {
    const { send, clock, flush, settled, stats } = schedulerHarness({
      dynamic_batching: { default_queue_policy: { max_queue_size: 2, timeout_action: 'DELAY', default_timeout_microseconds: 100 } },
    });
    void send('busy', [0]);
    clock.endTurn();
    void send('a', [1]);
    void send('b', [2]);
    clock.advanceMs(1);
    void send('c', [3]);
    await flush();
    expect(settled).toEqual([{ name: 'c', value: 'UNAVAILABLE: Exceeds maximum queue size', at: 1_000_000n }]);
    expect(stats.snapshot().inference_stats.fail.count).toBe(1);
  });

  describe('allow_timeout_override lets a request shorten the default timeout, never lengthen it (Triton PolicyQueue::Enqueue)', () => {
    /** When the request `timeoutUs` sent behind a busy instance times out, in ms; undefined when it has not after 1 s. */
    async function timedOutAtMs(policy: Record<string, unknown>, timeoutUs: number): Promise<number | undefined> {
      const { send, clock, flush, settled } = schedulerHarness({ dynamic_batching: { default_queue_policy: policy } });
      void send('busy', [0]);
      clock.endTurn();
      void send('r', [1], { timeoutMicroseconds: timeoutUs });
      for (let ms = 0; ms < 1000 && settled.length === 0; ms++) {
        clock.advanceMs(1);
        await flush();
      }
      if (settled.length === 0) return undefined;
      expect(settled[0]!.value).toBe('UNAVAILABLE: Request timeout expired');
      return Number(settled[0]!.at) / 1e6;
    }

    it('a shorter request timeout replaces the default', async () => {
      expect(await timedOutAtMs({ allow_timeout_override: true, default_timeout_microseconds: 100_000 }, 3000)).toBe(3);
    });
    it('a longer request timeout is ignored: the default applies', async () => {
      expect(await timedOutAtMs({ allow_timeout_override: true, default_timeout_microseconds: 5000 }, 50_000)).toBe(5);
    });
    it('with no default timeout, a request timeout is ignored (it cannot be shorter than none)', async () => {
      expect(await timedOutAtMs({ allow_timeout_override: true }, 3000)).toBeUndefined();
    });
    it('a request timeout of 0 means the default', async () => {
      expect(await timedOutAtMs({ allow_timeout_override: true, default_timeout_microseconds: 5000 }, 0)).toBe(5);
    });
    it('without allow_timeout_override the default applies', async () => {
      expect(await timedOutAtMs({ default_timeout_microseconds: 5000 }, 3000)).toBe(5);
      expect(await timedOutAtMs({}, 3000)).toBeUndefined();
    });
  });

  it('a request dispatched before its deadline is not timed out afterwards', async () => {
    const { send, models, clock, flush, settled } = schedulerHarness({
      dynamic_batching: { default_queue_policy: { default_timeout_microseconds: 1000 } },
    });
    void send('a', [1]);
    clock.advanceMs(5);
    models[0]!.finish();
    await flush();
    expect(settled).toEqual([{ name: 'a', value: [2], at: 5_000_000n }]);
  });

  it('times out thousands of queued requests on time while the only instance is busy', async () => {
    const { send, clock, flush, settled, scheduler, pendingGauge, stats } = schedulerHarness({
      dynamic_batching: { default_queue_policy: { default_timeout_microseconds: 1000 } },
    });
    void send('busy', [0]);
    clock.endTurn();
    for (let i = 0; i < 5000; i++) {
      void send(`r${i}`, [i]);
      clock.advanceMs(0.0001);
    }
    expect(scheduler.pendingCount).toBe(5001);
    // The gauge counts requests awaiting execution, as Triton's does: not the one running.
    expect(await pendingGauge()).toBe(5000);
    clock.advanceMs(1);
    await flush();
    expect(settled.length).toBe(5000);
    expect(settled.every((s) => s.value === 'UNAVAILABLE: Request timeout expired' && s.at <= 1_500_000n)).toBe(true);
    expect(scheduler.pendingCount).toBe(1);
    expect(await pendingGauge()).toBe(0);
    expect(stats.snapshot().inference_stats.fail.count).toBe(5000);
  });
});

describe('ordering and instances', () => {
  it('preserve_ordering follows dispatch order: a later high-priority request does not wait for queued low-priority ones', async () => {
    const { send, models, flush, settled, clock } = schedulerHarness(
      { max_batch_size: 1, ...levels({ preserve_ordering: true }) },
      { instances: 2 },
    );
    void send('A', [0]);
    void send('B', [1]);
    clock.endTurn();
    void send('C', [2]);
    void send('D', [3], { priority: 1 });
    models[0]!.finish();
    await flush();
    expect(models[0]!.batches).toEqual([[0], [3]]);
    models[0]!.finish();
    await flush();
    expect(settled.map((s) => s.name)).toEqual(['A']);
    models[1]!.finish();
    await flush();
    expect(settled.map((s) => s.name)).toEqual(['A', 'B', 'D']);
    models[0]!.finish();
    await flush();
    expect(settled.map((s) => s.name)).toEqual(['A', 'B', 'D', 'C']);
  });

  it('keeps every instance busy and grows batches while they are', async () => {
    const { send, models, flush, settled, clock } = schedulerHarness({ max_batch_size: 4, dynamic_batching: {} }, { instances: 2 });
    for (let i = 1; i <= 5; i++) {
      void send(`r${i}`, [i]);
      if (i <= 2) clock.endTurn();
    }
    clock.endTurn();
    expect(models.map((m) => m.batches)).toEqual([[[1]], [[2]]]);
    models[0]!.finish();
    await flush();
    expect(models[0]!.batches[1]).toEqual([3, 4, 5]);
    void send('r6', [6, 7]);
    void send('r7', [8]);
    models[1]!.finish();
    await flush();
    expect(models[1]!.batches[1]).toEqual([6, 7, 8]);
    models[0]!.finish();
    models[1]!.finish();
    await flush();
    const byName = Object.fromEntries(settled.map((s) => [s.name, s.value]));
    expect(byName).toEqual({ r1: [2], r2: [3], r3: [4], r4: [5], r5: [6], r6: [7, 8], r7: [9] });
  });

  it('without dynamic_batching runs multi-sample requests alone, one per free instance', async () => {
    const { send, models, clock } = schedulerHarness({}, { instances: 2 });
    void send('a', [1, 2]);
    void send('b', [3]);
    void send('c', [4]);
    clock.endTurn();
    expect(models.map((m) => m.batches)).toEqual([[[1, 2]], [[3]]]);
  });
});

describe('statistics after known traffic', () => {
  it('counts requests, samples, executions and batch sizes as Triton does', async () => {
    const { send, models, flush, stats, pendingGauge, clock } = schedulerHarness({
      dynamic_batching: { default_queue_policy: { max_queue_size: 4 } },
    });
    const first = send('a', [1]);
    clock.endTurn();
    const all = [first, send('b', [2, 3]), send('c', [4]), send('d', [5, 6, 7]), send('e', [8]), send('full', [9])];
    expect(await pendingGauge()).toBe(4); // 'a' runs, b..e wait, 'full' was refused
    models[0]!.failNext = true;
    models[0]!.finish();
    await flush();
    models[0]!.finish();
    await flush();
    void send('f', [10, 11]);
    clock.endTurn();
    models[0]!.finish();
    await Promise.all(all);
    await flush();
    const s = stats.snapshot();
    // The second batch (4 requests, 7 samples) fails.
    expect(models[0]!.batches).toEqual([[1], [2, 3, 4, 5, 6, 7, 8], [10, 11]]);
    expect(s.inference_stats.success.count).toBe(2);
    expect(s.inference_count).toBe(1 + 2);
    expect(s.execution_count).toBe(2);
    expect(s.inference_stats.fail.count).toBe(4 + 1);
    expect(s.batch_stats.map((b) => [b.batch_size, b.compute_infer.count])).toEqual([
      [1, 1],
      [2, 1],
    ]);
    expect(s.inference_stats.queue.count).toBe(2);
    expect(await pendingGauge()).toBe(0);
  });
});
