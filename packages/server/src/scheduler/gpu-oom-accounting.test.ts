import { describe, expect, it } from 'vitest';
import type { ExecutionResult, ModelInstance } from '../backends/backend.ts';
import { GpuOutOfMemoryError } from '../backends/gpu-oom.ts';
import type { ModelConfig } from '../config/model-config.ts';
import { ServerMetrics } from '../metrics/server-metrics.ts';
import { VersionStatistics } from '../metrics/version-statistics.ts';
import { BatchingScheduler } from './batching-scheduler.ts';

/** An instance whose every run fails with the given error. */
function failingInstance(error: Error): ModelInstance {
  return {
    execute: (): Promise<ExecutionResult> => Promise.reject(error),
    close: async () => undefined,
    onFatal: undefined,
  };
}

const config = { name: 'm', max_batch_size: 8, input: [], output: [] } as unknown as ModelConfig;
const request = () => ({
  inputs: [{ name: 'INPUT0', datatype: 'FP32' as const, shape: [1, 1], data: new Uint8Array(4) }],
  batchSize: 1,
  priority: 0,
  timeoutMicroseconds: 0,
  arrivalNs: process.hrtime.bigint(),
});

async function gpuOutOfMemoryCount(error: Error): Promise<number> {
  const metrics = new ServerMetrics({ processMetrics: false });
  const stats = new VersionStatistics('m', '1', metrics);
  const scheduler = new BatchingScheduler({ config, instances: [failingInstance(error)], outputNames: ['OUTPUT0'], stats });
  const results = await Promise.allSettled([scheduler.enqueue(request()), scheduler.enqueue(request())]);
  expect(results.every((r) => r.status === 'rejected')).toBe(true);
  const values = (await metrics.gpuOutOfMemory.get()).values.filter((v) => v.labels['model'] === 'm');
  return values.reduce((sum, v) => sum + v.value, 0);
}

describe('GPU out-of-memory accounting', () => {
  it('is recorded by the scheduler where the run failed, once per request of the failed batch', async () => {
    expect(await gpuOutOfMemoryCount(new GpuOutOfMemoryError("GPU out of memory while running model 'm'"))).toBe(2);
  });

  it('is not recorded for other backend failures', async () => {
    expect(await gpuOutOfMemoryCount(new Error('some other failure'))).toBe(0);
  });
});
