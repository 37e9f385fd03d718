import type { ExecutionResult, ModelInstance } from '../src/backends/backend.ts';
import type { ModelConfig } from '../src/config/model-config.ts';
import type { InferenceServerError } from '../src/errors/errors.ts';
import { ServerMetrics } from '../src/metrics/server-metrics.ts';
import { VersionStatistics } from '../src/metrics/version-statistics.ts';
import type { Tensor } from '../src/tensor/tensor.ts';
import { BatchingScheduler } from '../src/scheduler/batching-scheduler.ts';
import type { Clock } from '../src/scheduler/clock.ts';
import type { ExecutionGate } from '../src/scheduler/rate-limiter.ts';
import type { WarmupRun } from '../src/scheduler/scheduler.ts';

/**
 * A clock the test moves by hand. Work deferred to the end of the event-loop turn
 * (`defer`) runs when the test calls `endTurn()`, and before time moves: `advanceMs` ends
 * the current turn first, and each timer it fires runs in a turn of its own.
 */
export class FakeClock implements Clock {
  private now = 0n;
  private timers: { at: bigint; fn: () => void; id: number }[] = [];
  private nextId = 0;
  private deferred: (() => void)[] = [];
  /** What lagNs answers: the event loop's lag the test pretends. */
  lag = 0;

  nowNs(): bigint {
    return this.now;
  }
  setTimeout(fn: () => void, delayMs: number): unknown {
    return this.setPreciseTimeout(fn, BigInt(Math.ceil(delayMs * 1e6)));
  }
  setPreciseTimeout(fn: () => void, delayNs: bigint): unknown {
    const id = this.nextId++;
    this.timers.push({ at: this.now + delayNs, fn, id });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.timers = this.timers.filter((t) => t.id !== handle);
  }
  defer(fn: () => void): void {
    this.deferred.push(fn);
  }
  lagNs(): number {
    return this.lag;
  }
  /** Work deferred and not yet run. */
  get deferredCount(): number {
    return this.deferred.length;
  }
  /** Ends the current event-loop turn: runs deferred work, in order, including work it defers. */
  endTurn(): void {
    for (let fn = this.deferred.shift(); fn; fn = this.deferred.shift()) fn();
  }
  /** Ends the current turn, then moves time forward, firing due timers in order, each in a turn of its own. */
  advanceMs(ms: number): void {
    this.endTurn();
    const target = this.now + BigInt(Math.round(ms * 1e6));
    for (;;) {
      const due = this.timers.filter((t) => t.at <= target).sort((a, b) => (a.at < b.at ? -1 : 1))[0];
      if (!due) break;
      this.now = due.at;
      this.timers = this.timers.filter((t) => t !== due);
      due.fn();
      this.endTurn();
    }
    this.now = target;
  }
}

/** One turn of the real event loop: promise callbacks already due have run. */
export const tick = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * A model instance that computes OUTPUT0 = INPUT0 + 1 for FP32 and records every batch; a
 * run completes when the test calls `finish()` (or at once with `autoFinish`).
 */
export class RecordingInstance implements ModelInstance {
  readonly batches: number[][] = [];
  private pending: (() => void)[] = [];
  onFatal: ((error: Error) => void) | undefined;
  failNext = false;
  /** Time each run spends outside the model's compute (the hand-off a worker thread costs), ms of the clock. */
  handoffMs = 0;

  /** With a clock, a run's compute timings are the clock's time from execute to finish, less handoffMs. */
  constructor(
    private readonly autoFinish = false,
    private readonly clock?: Clock,
  ) {}

  execute(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult> {
    const input = inputs[0]!;
    const values = new Float32Array(input.data.slice().buffer);
    this.batches.push(Array.from(values));
    const fail = this.failNext;
    this.failNext = false;
    const startedNs = this.clock?.nowNs();
    return new Promise((resolve, reject) => {
      const finish = () => {
        if (fail) return reject(new Error('boom'));
        const out = new Float32Array(values.map((v) => v + 1));
        const computeNs =
          startedNs === undefined ? 5000 : Math.max(0, Number(this.clock!.nowNs() - startedNs) - this.handoffMs * 1e6 - 2000);
        resolve({
          outputs: outputNames.map((name) => ({ name, datatype: 'FP32', shape: input.shape, data: new Uint8Array(out.buffer) })),
          timings: { computeInputNs: 1000, computeInferNs: computeNs, computeOutputNs: 1000 },
        });
      };
      if (this.autoFinish) queueMicrotask(finish);
      else this.pending.push(finish);
    });
  }
  get running(): number {
    return this.pending.length;
  }
  /** Completes the oldest run. */
  finish(): void {
    this.pending.shift()?.();
  }
  async close(): Promise<void> {}
}

/**
 * A BatchingScheduler on a fake clock over `instances` RecordingInstances of a model with one
 * FP32 input of `width` (default 1) and max_batch_size 8 unless the config says otherwise.
 * `send` enqueues values and records how each request settled, and when.
 */
export function schedulerHarness(
  config: Partial<ModelConfig>,
  {
    instances = 1,
    gate,
    clock = new FakeClock(),
    warmupRuns,
  }: { instances?: number; gate?: ExecutionGate; clock?: FakeClock; warmupRuns?: readonly WarmupRun[] } = {},
) {
  const full: ModelConfig = {
    name: 'm',
    max_batch_size: 8,
    input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
    output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
    ...config,
  };
  const models = Array.from({ length: instances }, () => new RecordingInstance(false, clock));
  const metrics = new ServerMetrics({ processMetrics: false });
  const stats = new VersionStatistics('m', '1', metrics);
  const scheduler = new BatchingScheduler(
    { config: full, instances: models, outputNames: ['OUTPUT0'], stats, ...(gate && { gate }), ...(warmupRuns && { warmupRuns }) },
    undefined,
    clock,
  );
  const settled: { name: string; value: number[] | string; at: bigint }[] = [];
  const send = (name: string, values: number[], extra: { priority?: number; timeoutMicroseconds?: number } = {}) => {
    const data = new Uint8Array(Float32Array.from(values).buffer);
    const promise = scheduler.enqueue({
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [values.length, 1], data }],
      batchSize: values.length,
      priority: extra.priority ?? 0,
      timeoutMicroseconds: extra.timeoutMicroseconds ?? 0,
      arrivalNs: clock.nowNs(),
    });
    return promise.then(
      (outputs) => void settled.push({ name, value: Array.from(new Float32Array(outputs[0]!.data.slice().buffer)), at: clock.nowNs() }),
      (error: InferenceServerError) => void settled.push({ name, value: `${error.code}: ${error.message}`, at: clock.nowNs() }),
    );
  };
  const pendingGauge = async () => (await metrics.pendingRequests.get()).values[0]?.value;
  /** Lets settled promises run, ends the turn (deferred dispatch), and lets what that settled run. */
  const flush = async () => {
    await tick();
    clock.endTurn();
    await tick();
  };
  return { scheduler, clock, models, stats, metrics, send, settled, pendingGauge, flush };
}
