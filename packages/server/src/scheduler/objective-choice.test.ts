import { describe, expect, it } from 'vitest';
import type { Tensor } from '../tensor/tensor.ts';
import { batchingOptionsFromConfig } from './batching-options.ts';
import { chooseForObjective, expectedFinishNs, type ObjectiveInputs } from './objective-choice.ts';
import type { QueuedRequest } from './scheduler.ts';

const MS = 1_000_000;
const nowNs = 100n * BigInt(MS);

function rule(dynamic: Record<string, unknown> = {}, maxBatchSize = 8) {
  return {
    ...batchingOptionsFromConfig({
      name: 'm',
      max_batch_size: maxBatchSize,
      input: [],
      output: [],
      dynamic_batching: dynamic,
      parameters: { batchwise_latency_objective_ms: { string_value: '10' } },
    }),
    maxBatchStringHeapBytes: Infinity,
  };
}

/** Requests of one sample each, `agesMs` old (serving order), optionally of another width. */
function queue(agesMs: number[], width = 1): { request: QueuedRequest }[] {
  return agesMs.map((age) => {
    const input: Tensor = { name: 'INPUT0', datatype: 'FP32', shape: [1, width], data: new Uint8Array(4 * width) };
    return { request: { inputs: [input], batchSize: 1, priority: 0, timeoutMicroseconds: 0, arrivalNs: nowNs - BigInt(age * MS) } };
  });
}

/** t(b) = 1 ms + 0.25 ms·b: batch 1 takes 1.25 ms, batch 8 takes 3 ms. */
const inputs = (overrides: Partial<ObjectiveInputs> = {}): ObjectiveInputs => ({
  objectiveNs: 10 * MS,
  expectedRunNs: (b) => MS + 0.25 * MS * b,
  arrivalGapNs: 0.1 * MS,
  instances: 1,
  ...overrides,
});

describe('chooseForObjective', () => {
  it('under load, waits for the largest batch the oldest request can still afford', () => {
    // Batch 8 needs 7 more arrivals (0.7 ms) and runs 3 ms: 3.7 ms, well within 90% of 10 ms.
    const decision = chooseForObjective(queue([0]), rule(), nowNs, inputs());
    expect(decision.targetBatchSize).toBe(8);
    expect(decision.choice).toEqual({ waitNs: 700_000n });
    expect(decision.waitNs).toBe(700_000);
  });

  it('an older request affords less wait: the target shrinks to what still fits', () => {
    // Budget 9 - 6.5 = 2.5 ms; batch b needs (b-1)·0.1 + 1 + 0.25·b ms: 2.3 ms for 4, 2.65 ms for 5.
    const decision = chooseForObjective(queue([6.5]), rule(), nowNs, inputs());
    expect(decision.targetBatchSize).toBe(4);
    expect(decision.choice).toEqual({ waitNs: 300_000n });
  });

  it('sends at once when no larger batch can finish in time', () => {
    const decision = chooseForObjective(queue([8, 7.9]), rule(), nowNs, inputs());
    expect(decision).toEqual({ choice: { count: 2 }, targetBatchSize: 2, waitNs: 0 });
  });

  it('sends at once when this batch size keeps up with the arrival rate (light traffic)', () => {
    // One request per 5 ms, a batch of 1 takes 1.25 ms: waiting could only add latency.
    expect(chooseForObjective(queue([0]), rule(), nowNs, inputs({ arrivalGapNs: 5 * MS })).choice).toEqual({ count: 1 });
    // Two instances keep up with twice the rate at the same batch size.
    expect(chooseForObjective(queue([0]), rule(), nowNs, inputs({ arrivalGapNs: 0.7 * MS, instances: 2 })).choice).toEqual({ count: 1 });
    expect(chooseForObjective(queue([0]), rule(), nowNs, inputs({ arrivalGapNs: 0.7 * MS })).choice).toHaveProperty('waitNs');
  });

  it('sends a backlog at once when waiting would idle the instance for more than the larger batch saves', () => {
    // Six in hand came in 1.8 ms (0.3 ms apart), longer than the run's fixed 1 ms: they run at 6 / 2.5 ms,
    // while waiting 0.6 ms for batch 8 serves 8 / 3.6 ms. Batch 8 fits the budget, and six do not keep up alone.
    const decision = chooseForObjective(queue([0, 0, 0, 0, 0, 0]), rule(), nowNs, inputs({ arrivalGapNs: 0.3 * MS }));
    expect(decision).toEqual({ choice: { count: 6 }, targetBatchSize: 6, waitNs: 0 });
    // Arrivals three times as fast: the six came in 0.6 ms, under the fixed cost: batch 8 (0.2 + 3 ms) serves more, and it waits.
    expect(chooseForObjective(queue([0, 0, 0, 0, 0, 0]), rule(), nowNs, inputs({ arrivalGapNs: 0.1 * MS })).choice).toEqual({
      waitNs: 200_000n,
    });
  });

  it('sends at once while nothing is known: no run time yet, or fewer than two arrivals', () => {
    expect(chooseForObjective(queue([0]), rule(), nowNs, inputs({ expectedRunNs: () => undefined })).choice).toEqual({ count: 1 });
    expect(chooseForObjective(queue([0]), rule(), nowNs, inputs({ arrivalGapNs: undefined })).choice).toEqual({ count: 1 });
  });

  it('keeps Triton rules: max_batch_size, a preferred size reached goes at once, same shapes only', () => {
    expect(chooseForObjective(queue(Array(10).fill(0)), rule(), nowNs, inputs()).choice).toEqual({ count: 8 });
    expect(chooseForObjective(queue([0, 0, 0, 0]), rule({ preferred_batch_size: [4, 8] }), nowNs, inputs()).choice).toEqual({ count: 4 });
    const mixed = [...queue([0, 0]), ...queue([0], 2)];
    expect(chooseForObjective(mixed, rule(), nowNs, inputs()).choice).toEqual({ count: 2 });
  });
});

describe('expectedFinishNs', () => {
  const run = (b: number) => MS + 0.25 * MS * b;

  it('drains the queue ahead in full batches on whichever instance frees first', () => {
    // 20 samples ahead + 1: batches 8, 8, 5 on one free instance: 3 + 3 + 2.25 ms.
    expect(expectedFinishNs(20, 1, [{ busyForNs: 0, expectedRunNs: run }], 8)! / MS).toBeCloseTo(8.25, 9);
    // Two instances, one busy 1 ms more: 8 on the free one (3), 8 on the other (1 + 3), 5 on the first again (3 + 2.25).
    const two = [
      { busyForNs: 0, expectedRunNs: run },
      { busyForNs: MS, expectedRunNs: run },
    ];
    expect(expectedFinishNs(20, 1, two, 8)! / MS).toBeCloseTo(5.25, 9);
  });

  it('is unknown while an instance has no run time', () => {
    expect(expectedFinishNs(0, 1, [{ busyForNs: 0, expectedRunNs: () => undefined }], 8)).toBeUndefined();
  });
});
