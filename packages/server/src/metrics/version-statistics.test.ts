import { describe, expect, it } from 'vitest';
import { ServerMetrics } from './server-metrics.ts';
import { VersionStatistics } from './version-statistics.ts';

const series = (text: string, name: string) => text.split('\n').filter((line) => line.startsWith(`${name}{`));

describe('VersionStatistics in Prometheus', () => {
  it("exports Triton's per-version series at 0 as soon as the version loads, a failure series per reason", async () => {
    const metrics = new ServerMetrics({ processMetrics: false });
    new VersionStatistics('m', '3', metrics);
    const text = await metrics.registry.metrics();
    expect(series(text, 'nv_inference_request_failure').sort()).toEqual([
      'nv_inference_request_failure{model="m",reason="BACKEND",version="3"} 0',
      'nv_inference_request_failure{model="m",reason="CANCELED",version="3"} 0',
      'nv_inference_request_failure{model="m",reason="OTHER",version="3"} 0',
      'nv_inference_request_failure{model="m",reason="REJECTED",version="3"} 0',
    ]);
    for (const name of [
      'nv_inference_request_success',
      'nv_inference_count',
      'nv_inference_exec_count',
      'nv_inference_pending_request_count',
      'nv_inference_request_duration_us',
      'nv_inference_queue_duration_us',
      'nv_inference_compute_input_duration_us',
      'nv_inference_compute_infer_duration_us',
      'nv_inference_compute_output_duration_us',
    ]) {
      expect(series(text, name)).toEqual([`${name}{model="m",version="3"} 0`]);
    }
  });

  it('counts *_duration_us in whole microseconds, carrying the rest from one request to the next', async () => {
    const metrics = new ServerMetrics({ processMetrics: false });
    const stats = new VersionStatistics('m', '1', metrics);
    const request = { batchSize: 1, arrivalNs: process.hrtime.bigint() };
    for (let i = 0; i < 3; i++) stats.recordSuccess(request, 1500, { computeInputNs: 999, computeInferNs: 7_529_685, computeOutputNs: 1 });
    const value = async (counter: { get(): Promise<{ values: { value: number }[] }> }) => (await counter.get()).values[0]!.value;
    expect(await value(metrics.queueDurationUs)).toBe(4); // 4500 ns
    expect(await value(metrics.computeInputDurationUs)).toBe(2); // 2997 ns
    expect(await value(metrics.computeInferDurationUs)).toBe(22_589); // 22 589 055 ns
    expect(await value(metrics.computeOutputDurationUs)).toBe(0);
    expect(Number.isInteger(await value(metrics.requestDurationUs))).toBe(true);
    expect(stats.snapshot().inference_stats.queue).toEqual({ count: 3, ns: 4500 });
  });

  it('keeps counting across loads of the same version, as the series it shares; statistics restart with the load', async () => {
    const metrics = new ServerMetrics({ processMetrics: false });
    const timings = { computeInputNs: 1000, computeInferNs: 2000, computeOutputNs: 3000 };
    const first = new VersionStatistics('m', '1', metrics);
    first.recordExecution(2, timings);
    first.recordSuccess({ batchSize: 2, arrivalNs: process.hrtime.bigint() }, 5000, timings);
    first.recordFailure({ arrivalNs: process.hrtime.bigint() }, 'BACKEND');
    first.setPending(3);
    const reloaded = new VersionStatistics('m', '1', metrics);
    reloaded.recordExecution(1, timings);
    reloaded.recordSuccess({ batchSize: 1, arrivalNs: process.hrtime.bigint() }, 7000, timings);
    const text = await metrics.registry.metrics();
    expect(series(text, 'nv_inference_request_success')).toEqual(['nv_inference_request_success{model="m",version="1"} 2']);
    expect(series(text, 'nv_inference_count')).toEqual(['nv_inference_count{model="m",version="1"} 3']);
    expect(series(text, 'nv_inference_queue_duration_us')).toEqual(['nv_inference_queue_duration_us{model="m",version="1"} 12']);
    expect(series(text, 'nv_inference_request_failure')).toContain(
      'nv_inference_request_failure{model="m",reason="BACKEND",version="1"} 1',
    );
    expect(series(text, 'nv_inference_pending_request_count')).toEqual(['nv_inference_pending_request_count{model="m",version="1"} 0']);
    expect(series(text, 'batchwise_inference_batch_size_sum')).toEqual(['batchwise_inference_batch_size_sum{model="m",version="1"} 3']);
    expect(series(text, 'batchwise_inference_queue_duration_seconds_count')).toEqual([
      'batchwise_inference_queue_duration_seconds_count{model="m",version="1"} 2',
    ]);
    expect(reloaded.snapshot().inference_count).toBe(1);
  });

  it('shows the cache and GPU out-of-memory counters and the histograms of a version from their first count, as prom-client did', async () => {
    const metrics = new ServerMetrics({ processMetrics: false });
    const stats = new VersionStatistics('m', '1', metrics);
    const names = [
      'nv_cache_num_hits_per_model',
      'nv_cache_hit_duration_per_model',
      'nv_cache_num_misses_per_model',
      'nv_cache_miss_duration_per_model',
      'batchwise_gpu_out_of_memory_total',
      'batchwise_inference_request_duration_seconds_count',
      'batchwise_inference_batch_size_count',
    ];
    let text = await metrics.registry.metrics();
    for (const name of names) expect(series(text, name)).toEqual([]);
    stats.recordCacheHit({ arrivalNs: process.hrtime.bigint() }, 400);
    stats.recordCacheMiss(900);
    text = await metrics.registry.metrics();
    expect(series(text, 'nv_cache_num_hits_per_model')).toEqual(['nv_cache_num_hits_per_model{model="m",version="1"} 1']);
    expect(series(text, 'nv_cache_num_misses_per_model')).toEqual(['nv_cache_num_misses_per_model{model="m",version="1"} 1']);
    // Under a whole microsecond so far: nothing counted yet.
    expect(series(text, 'nv_cache_hit_duration_per_model')).toEqual([]);
    expect(series(text, 'batchwise_inference_request_duration_seconds_count')).toEqual([
      'batchwise_inference_request_duration_seconds_count{model="m",version="1"} 1',
    ]);
    stats.recordCacheHit({ arrivalNs: process.hrtime.bigint() }, 700);
    stats.recordGpuOutOfMemory();
    text = await metrics.registry.metrics();
    expect(series(text, 'nv_cache_hit_duration_per_model')).toEqual(['nv_cache_hit_duration_per_model{model="m",version="1"} 1']);
    expect(series(text, 'batchwise_gpu_out_of_memory_total')).toEqual(['batchwise_gpu_out_of_memory_total{model="m",version="1"} 1']);
    expect(series(text, 'batchwise_inference_batch_size_count')).toEqual([]);
  });

  it('reads the pending gauge when scraped', async () => {
    const metrics = new ServerMetrics({ processMetrics: false });
    const stats = new VersionStatistics('m', '1', metrics);
    stats.setPending(7);
    expect((await metrics.pendingRequests.get()).values).toEqual([{ labels: { model: 'm', version: '1' }, value: 7 }]);
    stats.setPending(0);
    expect((await metrics.pendingRequests.get()).values).toEqual([{ labels: { model: 'm', version: '1' }, value: 0 }]);
  });
});
