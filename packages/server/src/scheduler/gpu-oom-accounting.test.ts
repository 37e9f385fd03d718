import { describe, expect, it, vi } from 'vitest';
import { GpuOutOfMemoryError } from '../backends/gpu-oom.ts';
import { schedulerHarness } from '../../test-support/scheduler.ts';

/** Two requests batched together on an instance whose run fails with `error`; how often a GPU OOM was recorded. */
async function gpuOutOfMemoryRecords(error: Error): Promise<{ records: number; settled: string[] }> {
  const { models, stats, send, settled, flush } = schedulerHarness({ dynamic_batching: {} });
  models[0]!.execute = () => Promise.reject(error);
  const recorded = vi.spyOn(stats, 'recordGpuOutOfMemory');
  const sent = [send('a', [1]), send('b', [2])];
  await flush();
  await Promise.all(sent);
  return { records: recorded.mock.calls.length, settled: settled.map((s) => String(s.value)) };
}

describe('GPU out-of-memory accounting', () => {
  it('is recorded by the scheduler where the run failed, once per request of the failed batch', async () => {
    const { records, settled } = await gpuOutOfMemoryRecords(new GpuOutOfMemoryError("GPU out of memory while running model 'm'"));
    expect(records).toBe(2);
    expect(settled).toEqual(["INTERNAL: GPU out of memory while running model 'm'", "INTERNAL: GPU out of memory while running model 'm'"]);
  });

  it('is not recorded for other backend failures', async () => {
    expect((await gpuOutOfMemoryRecords(new Error('some other failure'))).records).toBe(0);
  });
});
