import { describe, expect, it } from 'vitest';
import type { Tensor } from '../tensor/tensor.ts';
import { chooseBatch } from './batch-choice.ts';
import { batchingOptionsFromConfig } from './batching-options.ts';
import type { QueuedRequest } from './scheduler.ts';

function rule(dynamic: { preferred?: number[]; delayUs?: number } = {}, maxBatchSize = 8) {
  return batchingOptionsFromConfig({
    name: 'm',
    max_batch_size: maxBatchSize,
    input: [],
    output: [],
    dynamic_batching: {
      ...(dynamic.preferred && { preferred_batch_size: dynamic.preferred }),
      max_queue_delay_microseconds: dynamic.delayUs ?? 0,
    },
  });
}

/** Requests of the given batch sizes, arrived at time 0; `width` per request when given. */
function queue(sizes: number[], widths: number[] = [], names: string[][] = []): { request: QueuedRequest }[] {
  return sizes.map((batchSize, i) => {
    const inputs: Tensor[] = (names[i] ?? ['INPUT0']).map((name) => ({
      name,
      datatype: 'FP32',
      shape: [batchSize, widths[i] ?? 1],
      data: new Uint8Array(0),
    }));
    return { request: { inputs, batchSize, priority: 0, timeoutMicroseconds: 0, arrivalNs: 0n } };
  });
}

describe('chooseBatch (Triton GetDynamicBatch)', () => {
  it('without preferred sizes: everything up to max goes at once with no delay', () => {
    expect(chooseBatch(queue([1, 1, 1]), rule(), 0n)).toEqual({ count: 3 });
    expect(chooseBatch(queue([3, 3, 3]), rule(), 0n)).toEqual({ count: 2 });
  });

  it("stops growing before the batch's BYTES strings would pass the instances' room for them", () => {
    const q = queue([1, 1, 1]).map(({ request }) => ({ request: { ...request, stringHeapBytes: 40 } }));
    expect(chooseBatch(q, { ...rule(), maxBatchStringHeapBytes: 100 }, 0n)).toEqual({ count: 2 });
    expect(chooseBatch(q, { ...rule(), maxBatchStringHeapBytes: 120 }, 0n)).toEqual({ count: 3 });
  });

  it('waits for the rest of the delay, counted from the oldest request', () => {
    const q = queue([1, 1]);
    q[1]!.request = { ...q[1]!.request, arrivalNs: 400_000n };
    expect(chooseBatch(q, rule({ delayUs: 1000 }), 600_000n)).toEqual({ waitNs: 400_000n });
    expect(chooseBatch(q, rule({ delayUs: 1000 }), 1_000_000n)).toEqual({ count: 2 });
  });

  it('a full batch goes at once despite the delay', () => {
    expect(chooseBatch(queue([4, 4, 1]), rule({ delayUs: 1000 }), 0n)).toEqual({ count: 2 });
  });

  it('the next request not fitting ends the batch at once', () => {
    expect(chooseBatch(queue([5, 4]), rule({ delayUs: 1000 }), 0n)).toEqual({ count: 1 });
  });

  it('sends the largest preferred size reached, even when more is queued', () => {
    expect(chooseBatch(queue([1, 1, 1, 1, 1, 1, 1, 1]), rule({ preferred: [2, 4], delayUs: 1000 }), 0n)).toEqual({ count: 4 });
    expect(chooseBatch(queue([1, 1, 1]), rule({ preferred: [2, 4], delayUs: 1000 }), 0n)).toEqual({ count: 2 });
  });

  it('with more queued than the largest preferred size and none reached, sends what stays below it', () => {
    expect(chooseBatch(queue([1, 1, 1, 2]), rule({ preferred: [4], delayUs: 1000 }), 0n)).toEqual({ count: 3 });
  });

  it('once the delay has passed, sends everything rather than a preferred size', () => {
    expect(chooseBatch(queue([1, 1, 1, 1, 1]), rule({ preferred: [2], delayUs: 1000 }), 1_000_000n)).toEqual({ count: 5 });
  });

  it('never mixes non-batch shapes or different sets of inputs', () => {
    expect(chooseBatch(queue([1, 1, 1], [2, 2, 3]), rule({ delayUs: 1000 }), 0n)).toEqual({ count: 2 });
    expect(chooseBatch(queue([1, 1], [], [['A', 'B'], ['A']]), rule(), 0n)).toEqual({ count: 1 });
    expect(
      chooseBatch(
        queue(
          [1, 1],
          [],
          [
            ['A', 'B'],
            ['A', 'C'],
          ],
        ),
        rule(),
        0n,
      ),
    ).toEqual({ count: 1 });
  });

  const gap = (expectedArrivalGapNs: bigint | undefined, extra: { lastBatchNs?: bigint; idle?: boolean; population?: number } = {}) => ({
    expectedArrivalGapNs,
    lastBatchNs: extra.lastBatchNs,
    idle: extra.idle ?? false,
    population: extra.population,
  });

  it('adaptive delay: does not wait when the next request is expected after the delay', () => {
    expect(chooseBatch(queue([1]), rule({ delayUs: 1000 }), 0n, gap(5_000_000n))).toEqual({ count: 1 });
    expect(chooseBatch(queue([1]), rule({ delayUs: 1000 }), 0n, gap(100_000n))).toEqual({ waitNs: 1_000_000n });
    expect(chooseBatch(queue([1]), rule({ delayUs: 1000 }), 0n, gap(undefined))).toEqual({ waitNs: 1_000_000n });
  });

  it('adaptive delay: a lone request on an idle model does not wait when requests come further apart than a batch takes', () => {
    const delay = rule({ delayUs: 5000 });
    // Gaps of 0.7 ms, batches of 0.2 ms: a lone closed-loop client.
    expect(chooseBatch(queue([1]), delay, 0n, gap(700_000n, { lastBatchNs: 200_000n, idle: true }))).toEqual({ count: 1 });
    // Each condition is needed: company closer than a batch takes, a busy instance, a second request, no batch seen yet.
    expect(chooseBatch(queue([1]), delay, 0n, gap(700_000n, { lastBatchNs: 2_000_000n, idle: true }))).toEqual({ waitNs: 5_000_000n });
    expect(chooseBatch(queue([1]), delay, 0n, gap(700_000n, { lastBatchNs: 200_000n, idle: false }))).toEqual({ waitNs: 5_000_000n });
    expect(chooseBatch(queue([1, 1]), delay, 0n, gap(700_000n, { lastBatchNs: 200_000n, idle: true }))).toEqual({ waitNs: 5_000_000n });
    expect(chooseBatch(queue([1]), delay, 0n, gap(700_000n, { idle: true }))).toEqual({ waitNs: 5_000_000n });
  });

  it("adaptive delay: a batch that could grow goes once the queue holds the model's recent population", () => {
    const delay = rule({ delayUs: 5000 });
    // Arrivals close together: without the population, the batch waits out the delay.
    expect(chooseBatch(queue([1, 1, 1]), delay, 0n, gap(100_000n, { population: 3 }))).toEqual({ count: 3 });
    expect(chooseBatch(queue([1, 1, 1]), delay, 0n, gap(100_000n, { population: 4 }))).toEqual({ waitNs: 5_000_000n });
    expect(chooseBatch(queue([1, 1, 1]), delay, 0n, gap(100_000n))).toEqual({ waitNs: 5_000_000n });
    // Even before two arrivals gave a gap.
    expect(chooseBatch(queue([1, 1]), delay, 0n, gap(undefined, { population: 2 }))).toEqual({ count: 2 });
  });

  it('an empty queue sends nothing', () => {
    expect(chooseBatch([], rule(), 0n)).toEqual({ count: 0 });
  });
});
