import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../config/model-config.ts';
import { ServerMetrics } from '../metrics/server-metrics.ts';
import { VersionStatistics } from '../metrics/version-statistics.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { BatchingScheduler } from './batching-scheduler.ts';
import { FakeClock, RecordingInstance, tick } from '../../test-support/scheduler.ts';

function setup(
  dynamic: Record<string, unknown> | undefined,
  { instances = 1, maxBatchSize = 8, autoFinish = false, adaptive = false } = {},
) {
  const config: ModelConfig = {
    name: 'm',
    max_batch_size: maxBatchSize,
    input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [1] }],
    output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [1] }],
    ...(dynamic !== undefined && { dynamic_batching: dynamic }),
    // The adaptive delay is Batchwise's default; most rules here are Triton's strict semantics.
    ...(!adaptive && { parameters: { batchwise_adaptive_queue_delay: { string_value: 'false' } } }),
  };
  const clock = new FakeClock();
  const models = Array.from({ length: instances }, () => new RecordingInstance(autoFinish));
  const stats = new VersionStatistics('m', '1', new ServerMetrics({ processMetrics: false }));
  const scheduler = new BatchingScheduler({ config, instances: models, outputNames: ['OUTPUT0'], stats }, undefined, clock);
  const settled: { value: number[] | string; at: bigint }[] = [];
  const send = (values: number[], extra: { priority?: number; timeoutMicroseconds?: number; width?: number } = {}) => {
    const width = extra.width ?? 1;
    const input: Tensor = {
      name: 'INPUT0',
      datatype: 'FP32',
      shape: [values.length / width, width],
      data: new Uint8Array(Float32Array.from(values).buffer),
    };
    const promise = scheduler.enqueue({
      inputs: [input],
      batchSize: values.length / width,
      priority: extra.priority ?? 0,
      timeoutMicroseconds: extra.timeoutMicroseconds ?? 0,
      arrivalNs: clock.nowNs(),
    });
    const record = promise.then(
      (outputs) => settled.push({ value: Array.from(new Float32Array(outputs[0]!.data.slice().buffer)), at: clock.nowNs() }),
      (error: Error) => settled.push({ value: error.message, at: clock.nowNs() }),
    );
    return { promise, record };
  };
  /** Lets settled promises run, ends the turn (deferred dispatch), and lets what that settled run. */
  const flush = async () => {
    await tick();
    clock.endTurn();
    await tick();
  };
  return { scheduler, clock, models, stats, send, settled, flush };
}

describe('without dynamic_batching', () => {
  it('runs each request alone, in arrival order, on the next free instance', async () => {
    const { models, send, flush, clock } = setup(undefined, { instances: 2 });
    send([1]);
    send([2]);
    send([3]);
    clock.endTurn();
    expect(models[0]!.batches).toEqual([[1]]);
    expect(models[1]!.batches).toEqual([[2]]);
    models[1]!.finish();
    await flush();
    expect(models[1]!.batches).toEqual([[2], [3]]);
  });
});

describe('dispatch at the end of the event-loop turn', () => {
  it('requests enqueued in the same turn to an idle instance form one batch', () => {
    const { models, send, clock } = setup({}, { maxBatchSize: 8 });
    send([1]);
    send([2]);
    send([3]);
    expect(models[0]!.batches).toEqual([]);
    expect(clock.deferredCount).toBe(1); // coalesced: one dispatch per turn
    clock.endTurn();
    expect(models[0]!.batches).toEqual([[1, 2, 3]]);
  });

  it('an instance that frees up takes everything that arrived until the end of its turn', async () => {
    const { models, send, clock, flush } = setup({}, { maxBatchSize: 8 });
    send([0]);
    clock.endTurn();
    send([1]);
    send([2]);
    expect(clock.deferredCount).toBe(0); // nothing to do while the only instance is busy
    models[0]!.finish();
    await tick();
    send([3]);
    clock.endTurn();
    expect(models[0]!.batches).toEqual([[0], [1, 2, 3]]);
    models[0]!.finish();
    await flush();
    expect(clock.deferredCount).toBe(0); // the queue was empty when the instance freed up
  });

  it('without dynamic batching, requests of one turn still run one by one, one per free instance', () => {
    const { models, send, clock } = setup(undefined, { instances: 2 });
    send([1]);
    send([2]);
    send([3]);
    clock.endTurn();
    expect(models.map((m) => m.batches)).toEqual([[[1]], [[2]]]);
  });

  it('a burst to idle instances fills one batch before the next, as Triton does', () => {
    const { models, send, clock } = setup({}, { instances: 2, maxBatchSize: 4 });
    for (let i = 0; i < 6; i++) send([i]);
    clock.endTurn();
    expect(models.map((m) => m.batches)).toEqual([[[0, 1, 2, 3]], [[4, 5]]]);
  });

  it('a burst beyond max_queue_size is not refused while an instance is free to take from it', async () => {
    const { models, send, clock, flush, settled } = setup({ default_queue_policy: { max_queue_size: 2 } });
    send([0]);
    send([1]);
    send([2]); // the queue is full: the free instance takes [0, 1] now
    expect(models[0]!.batches).toEqual([[0, 1]]);
    send([3]);
    send([4]); // full, and no instance is free
    clock.endTurn();
    await flush();
    expect(settled.map((s) => s.value)).toEqual(['Exceeds maximum queue size']);
    models[0]!.finish();
    await flush();
    expect(models[0]!.batches).toEqual([
      [0, 1],
      [2, 3],
    ]);
  });
});

describe('dynamic batching', () => {
  it('sends at once when nobody waits (delay 0), and batches what queued while busy', async () => {
    const { models, send, flush, settled, clock } = setup({});
    send([1]);
    clock.endTurn();
    expect(models[0]!.batches).toEqual([[1]]);
    send([2]);
    send([3]);
    send([4]);
    models[0]!.finish();
    await flush();
    expect(models[0]!.batches).toEqual([[1], [2, 3, 4]]);
    models[0]!.finish();
    await flush();
    expect(settled.map((s) => s.value)).toEqual([[2], [3], [4], [5]]);
  });

  it('waits at most max_queue_delay from the oldest request, then sends what there is', async () => {
    const { models, send, clock } = setup({ max_queue_delay_microseconds: 1000 });
    send([1]);
    clock.advanceMs(0.6);
    send([2]);
    expect(models[0]!.batches).toEqual([]);
    clock.advanceMs(0.3);
    expect(models[0]!.batches).toEqual([]);
    clock.advanceMs(0.1);
    expect(models[0]!.batches).toEqual([[1, 2]]);
  });

  it('adaptive delay (the default): does not wait when the next request is not expected before the delay ends', async () => {
    const { models, send, clock, flush } = setup({ max_queue_delay_microseconds: 1000 }, { adaptive: true });
    send([1]);
    clock.endTurn();
    expect(models[0]!.batches).toEqual([]);
    clock.advanceMs(1);
    expect(models[0]!.batches).toEqual([[1]]);
    models[0]!.finish();
    await flush();
    clock.advanceMs(5);
    // Requests 5 ms apart: waiting 1 ms for company would only add latency.
    send([2]);
    clock.endTurn();
    expect(models[0]!.batches).toEqual([[1], [2]]);
  });

  it('adaptive delay: still waits when requests arrive closer together than the delay', () => {
    const { models, send, clock } = setup({ max_queue_delay_microseconds: 1000 }, { adaptive: true });
    for (let i = 0; i < 5; i++) {
      send([i]);
      clock.advanceMs(0.1);
    }
    expect(models[0]!.batches).toEqual([]);
    clock.advanceMs(0.6);
    expect(models[0]!.batches).toEqual([[0, 1, 2, 3, 4]]);
  });

  /**
   * `clients` closed-loop clients on the fake clock: each sends one sample, and `rttMs` after
   * its answer sends the next; a batch runs `batchMs`. Returns the statistics after `ms`.
   */
  async function closedLoop({
    clients,
    batchMs,
    rttMs,
    ms,
    maxBatchSize = 8,
  }: {
    clients: number;
    batchMs: number;
    rttMs: number;
    ms: number;
    maxBatchSize?: number;
  }) {
    const { models, send, clock, flush, stats } = setup({ max_queue_delay_microseconds: 5000 }, { adaptive: true, maxBatchSize });
    const start = (client: number) => void send([client]).promise.then(() => clock.setTimeout(() => start(client), rttMs));
    for (let c = 0; c < clients; c++) start(c);
    const model = models[0]!;
    let batchesSeen = 0;
    let runningSinceNs = 0n;
    for (let step = 0; step < ms * 10; step++) {
      clock.advanceMs(0.1);
      if (model.batches.length > batchesSeen) {
        batchesSeen = model.batches.length;
        runningSinceNs = clock.nowNs();
      }
      if (model.running > 0 && clock.nowNs() - runningSinceNs >= BigInt(batchMs * 1e6)) model.finish();
      await flush();
    }
    return stats.snapshot();
  }

  it('adaptive delay: a lone closed-loop client does not wait, even when its round trip is shorter than the delay', async () => {
    const s = await closedLoop({ clients: 1, batchMs: 0.2, rttMs: 0.5, ms: 100 });
    expect(s.execution_count).toBeGreaterThan(100);
    // Only the first request waits the 5 ms delay: nothing was known of the traffic yet.
    expect(s.inference_stats.queue.ns).toBe(5_000_000);
  });

  it('adaptive delay: closed-loop clients at load still form large batches', async () => {
    const s = await closedLoop({ clients: 8, batchMs: 2, rttMs: 0.5, ms: 100 });
    expect(s.inference_count / s.execution_count).toBeGreaterThanOrEqual(7);
  });

  it('adaptive delay: closed-loop clients whose batch could still grow go as the last of them arrives, not after the delay', async () => {
    // 8 clients, batches of 2 ms, answers back in 0.5 ms, a delay of 5 ms and a max batch of 16: the batch of 8 could
    // grow, so Triton's rule waits out the delay every cycle (7.5 ms; 13 batches in 100 ms). Once the model has seen
    // its population at once, the cycle is the run and the round trip (2.5 ms).
    const s = await closedLoop({ clients: 8, batchMs: 2, rttMs: 0.5, ms: 100, maxBatchSize: 16 });
    expect(s.inference_count / s.execution_count).toBeGreaterThanOrEqual(7);
    expect(s.execution_count).toBeGreaterThanOrEqual(30);
  });

  it('sends at once when the maximum batch can be formed', () => {
    const { models, send, clock } = setup({ max_queue_delay_microseconds: 1_000_000 }, { maxBatchSize: 4 });
    send([1, 2]);
    send([3]);
    clock.endTurn();
    expect(models[0]!.batches).toEqual([]);
    send([4]);
    clock.endTurn();
    expect(models[0]!.batches).toEqual([[1, 2, 3, 4]]);
  });

  it('sends at once when a preferred size can be formed, preferring the largest', async () => {
    const { models, send, clock, flush } = setup({ max_queue_delay_microseconds: 1_000_000, preferred_batch_size: [2, 4] });
    send([1]);
    clock.endTurn();
    expect(models[0]!.batches).toEqual([]);
    send([2]);
    clock.endTurn();
    expect(models[0]!.batches).toEqual([[1, 2]]);
    send([3]);
    send([4, 5]);
    send([6]);
    models[0]!.finish();
    await flush();
    expect(models[0]!.batches[1]).toEqual([3, 4, 5, 6]);
    clock.advanceMs(0);
  });

  it('keeps multi-sample requests whole: one that does not fit waits for the next batch', async () => {
    const { models, send, flush, clock } = setup({}, { maxBatchSize: 4 });
    send([0]);
    send([1, 2, 3]);
    send([4, 5]);
    clock.endTurn();
    expect(models[0]!.batches).toEqual([[0, 1, 2, 3]]);
    models[0]!.finish();
    await flush();
    expect(models[0]!.batches).toEqual([
      [0, 1, 2, 3],
      [4, 5],
    ]);
  });

  it('never batches requests whose shapes differ', async () => {
    const { models, send, flush, settled, clock } = setup({}, { maxBatchSize: 8 });
    send([0]);
    send([1, 2], { width: 2 });
    send([3]);
    clock.endTurn();
    expect(models[0]!.batches).toEqual([[0]]);
    models[0]!.finish();
    await flush();
    expect(models[0]!.batches[1]).toEqual([1, 2]);
    models[0]!.finish();
    await flush();
    expect(models[0]!.batches[2]).toEqual([3]);
    models[0]!.finish();
    await flush();
    expect(settled.map((s) => s.value)).toEqual([[1], [2, 3], [4]]);
  });

  it('serves higher priority levels first; an out-of-range priority takes the default level', async () => {
    const { models, send, flush, clock } = setup({ priority_levels: 3, default_priority_level: 2 }, { maxBatchSize: 2 });
    send([0]);
    clock.endTurn();
    send([1], { priority: 3 });
    send([2]);
    send([3], { priority: 1 });
    send([9], { priority: 4 });
    models[0]!.finish();
    await flush();
    expect(models[0]!.batches[1]).toEqual([3, 2]);
    models[0]!.finish();
    await flush();
    expect(models[0]!.batches[2]).toEqual([9, 1]);
  });

  it('rejects at once when the queue is full', async () => {
    const { send, flush, settled, stats, clock } = setup({ default_queue_policy: { max_queue_size: 2 } });
    send([0]);
    clock.endTurn();
    send([1]);
    send([2]);
    send([3]);
    await flush();
    expect(settled.map((s) => s.value)).toEqual(['Exceeds maximum queue size']);
    expect(stats.snapshot().inference_stats.fail.count).toBe(1);
  });

  it('times a request out at its deadline even while every instance is busy (REJECT)', async () => {
    const { models, send, clock, flush, settled } = setup({
      default_queue_policy: { default_timeout_microseconds: 5000, timeout_action: 'REJECT' },
    });
    send([0]);
    clock.endTurn();
    send([1]);
    clock.advanceMs(4.9);
    await flush();
    expect(settled).toEqual([]);
    clock.advanceMs(0.1);
    await flush();
    expect(settled).toEqual([{ value: 'Request timeout expired', at: 5_000_000n }]);
    expect(models[0]!.running).toBe(1);
  });

  it('uses the request timeout only when the policy allows overriding it', async () => {
    const allowed = setup({ default_queue_policy: { allow_timeout_override: true, default_timeout_microseconds: 100_000 } });
    allowed.send([0]);
    allowed.clock.endTurn();
    allowed.send([1], { timeoutMicroseconds: 1000 });
    allowed.clock.advanceMs(1);
    await allowed.flush();
    expect(allowed.settled.map((s) => s.value)).toEqual(['Request timeout expired']);

    const denied = setup({ default_queue_policy: { allow_timeout_override: false } });
    denied.send([0]);
    denied.clock.endTurn();
    denied.send([1], { timeoutMicroseconds: 1000 });
    denied.clock.advanceMs(10);
    await denied.flush();
    expect(denied.settled).toEqual([]);
  });

  it('DELAY: an expired request is served after those still in time, not rejected', async () => {
    const { models, send, clock, flush, settled } = setup(
      { default_queue_policy: { default_timeout_microseconds: 1000, timeout_action: 'DELAY' } },
      { maxBatchSize: 1 },
    );
    send([0]);
    send([1]);
    clock.advanceMs(2);
    send([2]);
    models[0]!.finish();
    await flush();
    models[0]!.finish();
    await flush();
    models[0]!.finish();
    await flush();
    expect(models[0]!.batches).toEqual([[0], [2], [1]]);
    expect(settled.every((s) => Array.isArray(s.value))).toBe(true);
  });

  it('preserve_ordering delivers responses in arrival order across instances', async () => {
    const { models, send, flush, settled, clock } = setup({ preserve_ordering: true }, { instances: 2, maxBatchSize: 1 });
    send([0]);
    send([1]);
    clock.endTurn();
    models[1]!.finish();
    await flush();
    expect(settled).toEqual([]);
    models[0]!.finish();
    await flush();
    expect(settled.map((s) => s.value)).toEqual([[1], [2]]);
  });

  it('keeps every instance busy: the next batch forms while one runs', async () => {
    const { models, send, clock, flush } = setup({}, { instances: 3, maxBatchSize: 4 });
    for (let i = 0; i < 3; i++) {
      send([i]);
      clock.endTurn();
    }
    send([3]);
    send([4]);
    clock.endTurn();
    expect(models.map((m) => m.batches)).toEqual([[[0]], [[1]], [[2]]]);
    models[1]!.finish();
    await flush();
    expect(models.map((m) => m.batches)).toEqual([[[0]], [[1], [3, 4]], [[2]]]);
  });

  it('fails every request of a failed batch and carries on', async () => {
    const { models, send, flush, settled, stats, clock } = setup({}, { maxBatchSize: 4 });
    send([0]);
    clock.endTurn();
    send([1]);
    send([2]);
    models[0]!.failNext = true;
    models[0]!.finish();
    await flush();
    expect(models[0]!.batches[1]).toEqual([1, 2]);
    models[0]!.finish();
    await flush();
    send([3]);
    clock.endTurn();
    models[0]!.finish();
    await flush();
    expect(settled.map((s) => s.value)).toEqual([[1], 'boom', 'boom', [4]]);
    expect(stats.snapshot().inference_stats.fail.count).toBe(2);
  });

  it('counts statistics as Triton does', async () => {
    const { models, send, flush, stats, clock } = setup({}, { maxBatchSize: 8, autoFinish: true });
    const first = send([0]);
    clock.endTurn();
    const all = [first, send([1, 2]), send([3])];
    await flush();
    await Promise.all(all.map((r) => r.record));
    await flush();
    const s = stats.snapshot();
    expect(s.inference_stats.success.count).toBe(3);
    expect(s.inference_count).toBe(4);
    expect(s.execution_count).toBe(models[0]!.batches.length);
    expect(s.batch_stats.map((b) => b.batch_size)).toEqual([1, 3]);
    expect(s.inference_stats.compute_infer.ns).toBe(3 * 5000);
  });

  it('drain resolves once nothing is queued or running', async () => {
    const { scheduler, models, send, flush, clock } = setup({});
    send([0]);
    clock.endTurn();
    send([1]);
    let drained = false;
    void scheduler.drain().then(() => (drained = true));
    models[0]!.finish();
    await flush();
    expect(drained).toBe(false);
    models[0]!.finish();
    await flush();
    expect(drained).toBe(true);
  });
});

describe('an instance that runs in place (executeNow, an ONNX session on the event loop)', () => {
  /** Doubles its input, or throws while `failing`. */
  class InPlaceInstance {
    failing = false;
    readonly batches: number[][] = [];
    onFatal = undefined;
    readonly executeNow = (inputs: readonly Tensor[]) => {
      const values = Array.from(new Float32Array(inputs[0]!.data.slice().buffer));
      this.batches.push(values);
      if (this.failing) throw new Error('the run failed');
      const data = new Uint8Array(Float32Array.from(values, (v) => v * 2).buffer);
      return {
        outputs: [{ name: 'OUTPUT0', datatype: 'FP32' as const, shape: [values.length, 1], data }],
        timings: { computeInputNs: 1, computeInferNs: 2, computeOutputNs: 3 },
      };
    };
    execute(): never {
      throw new Error('execute is not called where executeNow is');
    }
    close = async () => undefined;
  }

  it('answers the batch formed at the end of the turn in that turn, fails only that batch when a run throws, and serves on', async () => {
    const config: ModelConfig = {
      name: 'm',
      max_batch_size: 8,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [1] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [1] }],
      dynamic_batching: {},
    };
    const clock = new FakeClock();
    const instance = new InPlaceInstance();
    const stats = new VersionStatistics('m', '1', new ServerMetrics({ processMetrics: false }));
    const scheduler = new BatchingScheduler({ config, instances: [instance], outputNames: ['OUTPUT0'], stats }, undefined, clock);
    const send = (value: number) =>
      scheduler.enqueue({
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], data: new Uint8Array(Float32Array.of(value).buffer) }],
        batchSize: 1,
        priority: 0,
        timeoutMicroseconds: 0,
        arrivalNs: clock.nowNs(),
      });
    const values = (outputs: Tensor[]) => Array.from(new Float32Array(outputs[0]!.data.slice().buffer));

    const first = [send(1), send(2)];
    clock.endTurn();
    expect(instance.batches).toEqual([[1, 2]]);
    expect(scheduler.pendingCount).toBe(0); // run and settled within the turn
    expect((await Promise.all(first)).map(values)).toEqual([[2], [4]]);

    instance.failing = true;
    const failed = [send(3), send(4)];
    clock.endTurn();
    for (const request of failed) await expect(request).rejects.toThrow(/the run failed/);
    expect(scheduler.pendingCount).toBe(0);

    instance.failing = false;
    const after = send(5);
    clock.endTurn();
    expect(values(await after)).toEqual([10]);
    expect(stats.snapshot().execution_count).toBe(2);
  });
});
