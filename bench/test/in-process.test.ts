import { describe, expect, it } from 'vitest';
import { mlp } from '@batchwise/modelgen';
import {
  interleave,
  interpolate,
  latencyVsInProcess,
  median,
  medianRunMs,
  openInProcess,
  samplesPerSecondOnBatches,
  throughputVsLimit,
  type ReferenceWindow,
} from '../src/in-process.ts';
import { SMOKE_MODEL } from '../src/scenarios/batching.ts';
import { cachedModel, fp32Config } from '../src/workload.ts';

const window = (runs: [batchSize: number, runMs: number][]): ReferenceWindow => ({
  at: '2026-11-24T00:00:00Z',
  durationMs: 100,
  runs: runs.map(([batchSize, runMs]) => ({ batchSize, runMs, runs: 10 })),
});

describe('in-process reference', () => {
  it('takes the median of each size over the windows that measured it', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    const runMs = medianRunMs([
      window([
        [1, 2],
        [4, 4],
      ]),
      window([[1, 3]]),
      window([
        [1, 10],
        [4, 6],
      ]),
    ]);
    expect([...runMs]).toEqual([
      [1, 3],
      [4, 5],
    ]);
  });

  it('compares the server with the in-process run time of the very batches it ran', () => {
    // 3 batches of 1 (2 ms each) and 1 of 9 (6 ms): 12 samples in 12 ms = 1000 samples/s,
    // while samples/s at the mean batch (3) interpolated between 1 and 9 would say otherwise.
    const runMs = new Map([
      [1, 2],
      [9, 6],
    ]);
    expect(samplesPerSecondOnBatches({ 1: 3, 9: 1 }, runMs)).toBeCloseTo(1000);
    expect(samplesPerSecondOnBatches({ 1: 3, 5: 1 }, runMs)).toBeUndefined();
    expect(
      interpolate(
        [
          { batchSize: 1, samplesPerSecond: 500 },
          { batchSize: 9, samplesPerSecond: 1500 },
        ],
        3,
      ),
    ).toBe(750);
    const c = throughputVsLimit({ throughput: 900, avgBatchSize: 3, batches: { 1: 3, 9: 1 } }, runMs)!;
    expect(c['limit_on_formed_batches']).toBeCloseTo(1000);
    expect(c['limit_at_mean_batch']).toBe(750);
    expect(c['server_vs_limit']).toBeCloseTo(0.9);
    expect(latencyVsInProcess(2.2, 2)['c1_p50_over_in_process']).toBeCloseTo(1.1);
  });

  it('interleaves the batches the server ran: each once, each size spread evenly', () => {
    expect(interleave({ 1: 4, 8: 2, 16: 1 })).toEqual([1, 8, 1, 16, 1, 8, 1]);
  });

  it('runs the batch sizes in turn for the window, each at least three times', async () => {
    const file = await cachedModel(
      `mlp-${SMOKE_MODEL.layers}x${SMOKE_MODEL.width}`,
      () => mlp(SMOKE_MODEL),
      () => undefined,
    );
    const config = fp32Config('m', { width: SMOKE_MODEL.width, maxBatchSize: 8, batching: true, threads: 1 });
    const model = await openInProcess({ file, width: SMOKE_MODEL.width, config });
    try {
      const w = await model.window([4, 1, 2, 1], 20);
      expect(w.runs.map((r) => r.batchSize)).toEqual([1, 2, 4]);
      for (const r of w.runs) {
        expect(r.runs).toBeGreaterThanOrEqual(3);
        expect(r.runMs).toBeGreaterThan(0);
      }
      expect(w.durationMs).toBeGreaterThanOrEqual(20);
      // The server's batches replayed: rows and CPU over the window.
      const replay = await model.replay({ 1: 2, 4: 1 }, 20);
      expect(replay.runs).toBeGreaterThan(0);
      expect(replay.rows).toBeGreaterThanOrEqual(replay.runs);
      expect(replay.rowsPerCpuSecond).toBeGreaterThan(0);
      expect(replay.rowsPerSecond).toBeGreaterThan(0);
    } finally {
      await model.release();
    }
  });
});
