import { describe, expect, it } from 'vitest';
import type { ExecutionResult } from '../backends/backend.ts';
import { ServerMetrics } from '../metrics/server-metrics.ts';
import { VersionStatistics } from '../metrics/version-statistics.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { BatchingScheduler } from './batching-scheduler.ts';
import { systemClock } from './clock.ts';
import { RecordingInstance } from '../../test-support/scheduler.ts';

/** Notes when each batch reached the instance, on the real clock. */
class TimedInstance extends RecordingInstance {
  readonly startedNs: bigint[] = [];
  override execute(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult> {
    this.startedNs.push(process.hrtime.bigint());
    return super.execute(inputs, outputNames);
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

describe('max_queue_delay on the real clock', () => {
  it('systemClock.setPreciseTimeout never fires early and cancels', async () => {
    const fired: number[] = [];
    for (const delayUs of [50, 300, 1500]) {
      const start = process.hrtime.bigint();
      await new Promise<void>((resolve) => systemClock.setPreciseTimeout(() => resolve(), BigInt(delayUs) * 1000n));
      fired.push(Number(process.hrtime.bigint() - start) / 1000);
    }
    expect(fired[0]).toBeGreaterThanOrEqual(50);
    expect(fired[1]).toBeGreaterThanOrEqual(300);
    expect(fired[2]).toBeGreaterThanOrEqual(1500);
    let cancelledFired = false;
    systemClock.clearTimeout(systemClock.setPreciseTimeout(() => (cancelledFired = true), 100_000n));
    systemClock.clearTimeout(systemClock.setPreciseTimeout(() => (cancelledFired = true), 2_000_000n));
    await new Promise((r) => setTimeout(r, 5));
    expect(cancelledFired).toBe(false);
  });

  // Node's setTimeout turns 100 µs into at least a whole millisecond: every lone request
  // used to wait about 1 ms. A median keeps the bound meaningful on a busy machine, where a
  // few turns of the event loop may be slow.
  it('a lone request waits about 100 µs for a 100 µs delay, not a millisecond', async () => {
    const instance = new TimedInstance(true);
    const stats = new VersionStatistics('m', '1', new ServerMetrics({ processMetrics: false }));
    const scheduler = new BatchingScheduler({
      config: {
        name: 'm',
        max_batch_size: 8,
        input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [1] }],
        output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [1] }],
        dynamic_batching: { max_queue_delay_microseconds: 100 },
        parameters: { batchwise_adaptive_queue_delay: { string_value: 'false' } },
      },
      instances: [instance],
      outputNames: ['OUTPUT0'],
      stats,
    });
    const waitsUs: number[] = [];
    for (let i = 0; i < 60; i++) {
      const arrivalNs = process.hrtime.bigint();
      await scheduler.enqueue({
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], data: new Uint8Array(4) }],
        batchSize: 1,
        priority: 0,
        timeoutMicroseconds: 0,
        arrivalNs,
      });
      waitsUs.push(Number(instance.startedNs[i]! - arrivalNs) / 1000);
    }
    expect(Math.min(...waitsUs)).toBeGreaterThanOrEqual(100);
    expect(median(waitsUs)).toBeLessThan(600);
  });
});

describe('dispatch at the end of the turn, on the real clock', () => {
  const config = (dynamic: Record<string, unknown> | undefined) => ({
    name: 'm',
    max_batch_size: 8,
    input: [{ name: 'INPUT0', data_type: 'TYPE_FP32' as const, dims: [1] }],
    output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32' as const, dims: [1] }],
    ...(dynamic && { dynamic_batching: dynamic }),
  });
  const request = () => ({
    inputs: [{ name: 'INPUT0', datatype: 'FP32' as const, shape: [1, 1], data: new Uint8Array(4) }],
    batchSize: 1,
    priority: 0,
    timeoutMicroseconds: 0,
    arrivalNs: process.hrtime.bigint(),
  });
  const nextImmediate = () => new Promise((resolve) => setImmediate(resolve));

  // The deferred dispatch is a setImmediate queued before the test's own: if it waited for
  // any timer, the batch would not have started when the test's immediate runs.
  for (const [name, dynamic] of [
    ['max_queue_delay 0', {}],
    ['the adaptive delay with a lone client', { max_queue_delay_microseconds: 5000 }],
    ['no dynamic batching', undefined],
  ] as const) {
    it(`${name}: a lone client's requests start in the turn they arrive, one after another, without a timer`, async () => {
      const instance = new TimedInstance(true);
      const stats = new VersionStatistics('m', '1', new ServerMetrics({ processMetrics: false }));
      const scheduler = new BatchingScheduler({ config: config(dynamic), instances: [instance], outputNames: ['OUTPUT0'], stats });
      // The adaptive delay learns the traffic from its first requests (the first waits the delay).
      const learning = dynamic && 'max_queue_delay_microseconds' in dynamic ? 3 : 0;
      for (let i = 0; i < 30; i++) {
        const done = scheduler.enqueue(request());
        expect(instance.batches.length).toBe(i);
        if (i >= learning) {
          await nextImmediate();
          expect(instance.batches.length).toBe(i + 1);
        }
        await done;
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    });
  }
});
