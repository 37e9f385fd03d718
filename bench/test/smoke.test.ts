import { describe, expect, it } from 'vitest';
import { SMOKE_WINDOWS } from '../src/load-generator.ts';
import { runBatching, SMOKE_MODEL } from '../src/scenarios/batching.ts';
import { runLimit } from '../src/scenarios/limit.ts';
import { runOverhead } from '../src/scenarios/overhead.ts';

const log = () => undefined;

// Tiny versions of each scenario, so that the benchmark code keeps working; numbers are not checked.
describe('bench scenarios (smoke)', () => {
  // One test, not two: the limit scenario reads the result file the batching run writes.
  it('batching: both configurations answer over every protocol, closed and open loop; then limit runs in-process at the sizes it formed', async () => {
    const result = await runBatching({
      model: SMOKE_MODEL,
      concurrencies: [16],
      rates: [200],
      windows: SMOKE_WINDOWS,
      protocols: ['http-binary', 'http-json', 'grpc'],
      log,
      name: 'smoke-batching',
    });
    expect(result.points).toHaveLength(12);
    for (const p of result.points) {
      expect(p.client.errors, p.client.firstError).toBe(0);
      expect(p.client.throughput).toBeGreaterThan(0);
      expect(p.server.requests).toBeGreaterThan(0);
    }
    const open = result.points.filter((p) => p.rate === 200);
    expect(open).toHaveLength(6);
    for (const p of open) expect(p.client.load).toMatchObject({ rate: 200, arrivals: 'poisson' });
    for (const p of result.points.filter((p) => p.model === 'mlp_off')) expect(Object.keys(p.server.batches).map(Number)).toEqual([1]);
    expect(Object.keys(result.ratios).sort()).toEqual([
      'p99_on_vs_off_c16',
      'p99_on_vs_off_c16_grpc',
      'p99_on_vs_off_c16_http_json',
      'throughput_on_vs_off_c16',
      'throughput_on_vs_off_c16_grpc',
      'throughput_on_vs_off_c16_http_json',
    ]);

    const { rows, comparison } = await runLimit({ model: SMOKE_MODEL, durationMs: 50, log, name: 'smoke-limit', batchingName: 'smoke-batching' });
    const formed = [...new Set(result.points.flatMap((p) => Object.keys(p.server.batches).map(Number)))].sort((a, b) => a - b);
    expect(rows.map((r) => r.batchSize)).toEqual(formed);
    expect(rows.every((r) => r.samplesPerSecond > 0)).toBe(true);
    expect(comparison['server_vs_limit']).toBeGreaterThan(0);
  });

  it('overhead and gRPC: echo, HTTP binary, gRPC and lean gRPC all answer', async () => {
    const { results, ratios } = await runOverhead({ concurrency: 2, windows: SMOKE_WINDOWS, protocols: ['http-binary', 'grpc', 'grpc-raw'], log, name: 'smoke-overhead' });
    expect(results.map((r) => r.label)).toEqual(['fastify echo http-binary', 'batchwise http-binary', 'batchwise grpc', 'batchwise grpc-raw']);
    expect(results.every((r) => r.errors === 0 && r.throughput > 0)).toBe(true);
    expect(ratios['grpc_vs_http_binary']).toBeGreaterThan(0);
    expect(ratios['grpc_raw_vs_http_binary']).toBeGreaterThan(0);
  });
});
