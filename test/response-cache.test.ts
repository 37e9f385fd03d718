/**
 * Triton's response cache end to end: `--cache-config local,size=...` on the server and
 * `response_cache { enable: true }` on the model; a repeated request is answered from the
 * cache, counted as Triton counts it (a success and a cache hit, not an inference).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configPbtxt, identity } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { getJson, postJson, startTestServer } from './support/server.ts';

const config = (name: string, cached: boolean) =>
  configPbtxt({
    name,
    maxBatchSize: 8,
    inputs: [{ name: 'INPUT0', datatype: 'FP32', dims: [4] }],
    outputs: [{ name: 'OUTPUT0', datatype: 'FP32', dims: [4] }],
  }) + (cached ? '\nresponse_cache { enable: true }\n' : '');

describe('response cache', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  beforeAll(async () => {
    repo = await makeRepository([
      { name: 'cached', model: identity('FP32', [4]), config: config('cached', true) },
      { name: 'uncached', model: identity('FP32', [4]), config: config('uncached', false) },
    ]);
    server = await startTestServer([repo.dir], { cacheConfig: ['local,size=1048576'] });
  });
  afterAll(async () => {
    await server?.close();
    await repo?.remove();
  });

  const infer = (model: string, data: number[]) =>
    postJson(`${server.url}/v2/models/${model}/infer`, { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data }] });
  const stats = async (model: string) => (await getJson(`${server.url}/v2/models/${model}/stats`)).model_stats[0];

  it('answers a repeated request from the cache and counts it as Triton does', async () => {
    const first = await infer('cached', [1, 2, 3, 4]);
    const second = await infer('cached', [1, 2, 3, 4]);
    const other = await infer('cached', [4, 3, 2, 1]);
    expect(first.status).toBe(200);
    expect(second.json).toEqual(first.json);
    expect(other.json.outputs[0].data).toEqual([4, 3, 2, 1]);
    const s = await stats('cached');
    expect(s.inference_stats.success.count).toBe(3);
    expect(s.inference_stats.cache_hit.count).toBe(1);
    expect(s.inference_stats.cache_miss.count).toBe(2);
    expect(s.inference_stats.cache_hit.ns).toBeGreaterThan(0);
    expect(s.inference_count).toBe(2);
    expect(s.execution_count).toBe(2);
    const metrics = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/nv_cache_num_hits_per_model\{model="cached",version="1"\} 1/);
    expect(metrics).toMatch(/nv_cache_num_misses_per_model\{model="cached",version="1"\} 2/);
    expect(metrics).toMatch(/nv_cache_num_entries 2/);
  });

  it('leaves models that do not enable it alone', async () => {
    await infer('uncached', [1, 2, 3, 4]);
    await infer('uncached', [1, 2, 3, 4]);
    const s = await stats('uncached');
    expect(s.inference_stats.cache_hit.count).toBe(0);
    expect(s.inference_stats.cache_miss.count).toBe(0);
    expect(s.execution_count).toBe(2);
  });
});
