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
      'nv_inference_request_failure{model="m",version="3",reason="BACKEND"} 0',
      'nv_inference_request_failure{model="m",version="3",reason="CANCELED"} 0',
      'nv_inference_request_failure{model="m",version="3",reason="OTHER"} 0',
      'nv_inference_request_failure{model="m",version="3",reason="REJECTED"} 0',
    ]);
    for (const name of [
      'nv_inference_request_success', 'nv_inference_count', 'nv_inference_exec_count', 'nv_inference_pending_request_count',
      'nv_inference_request_duration_us', 'nv_inference_queue_duration_us', 'nv_inference_compute_input_duration_us',
      'nv_inference_compute_infer_duration_us', 'nv_inference_compute_output_duration_us',
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
});
