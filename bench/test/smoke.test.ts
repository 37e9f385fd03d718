import { describe, expect, it } from 'vitest';
import { SMOKE_WINDOWS } from '../src/load-generator.ts';
import { runBatching, SMOKE_MODEL } from '../src/scenarios/batching.ts';
import { runLimit } from '../src/scenarios/limit.ts';
import { runOverhead } from '../src/scenarios/overhead.ts';

const log = () => undefined;

// Tiny versions of each scenario, so that the benchmark code keeps working; numbers are not checked.
describe('bench scenarios (smoke)', () => {
  it('batching: both configurations answer, batches form when batching is on', async () => {
    const result = await runBatching({ model: SMOKE_MODEL, concurrencies: [4], windows: SMOKE_WINDOWS, log, name: 'smoke-batching' });
    expect(result.points).toHaveLength(2);
    for (const p of result.points) {
      expect(p.client.errors).toBe(0);
      expect(p.client.throughput).toBeGreaterThan(0);
    }
    const off = result.points.find((p) => p.model === 'mlp_off')!;
    expect(Object.keys(off.server.batches).map(Number)).toEqual([1]);
    expect(result.ratios['throughput_on_vs_off_c16']).toBeUndefined();
  });

  it('limit: runs the model in-process at each batch size', async () => {
    const { rows } = await runLimit({ model: SMOKE_MODEL, batchSizes: [1, 4], durationMs: 50, log });
    expect(rows.map((r) => r.batchSize)).toEqual([1, 4]);
    expect(rows.every((r) => r.samplesPerSecond > 0)).toBe(true);
  });

  it('overhead and gRPC: echo, HTTP binary and gRPC all answer', async () => {
    const { results, ratios } = await runOverhead({ concurrency: 2, windows: SMOKE_WINDOWS, protocols: ['http-binary', 'grpc'], log, name: 'smoke-overhead' });
    expect(results.map((r) => r.label)).toEqual(['fastify echo http-binary', 'batchwise http-binary', 'batchwise grpc']);
    expect(results.every((r) => r.errors === 0 && r.throughput > 0)).toBe(true);
    expect(ratios['grpc_vs_http_binary']).toBeGreaterThan(0);
  });
});
