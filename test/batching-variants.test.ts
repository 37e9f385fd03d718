import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { postJson, startTestServer, getJson } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

describe('dynamic batching of BYTES and variable shapes, and priorities, over HTTP', () => {
  let server: Server;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([
      {
        name: 'text',
        model: identity('STRING', [-1]),
        config: `name: "text"
max_batch_size: 16
input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 20000 }`,
      },
      {
        name: 'ranked',
        model: identity('FP32', [2]),
        config: `name: "ranked"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]
dynamic_batching { priority_levels: 2 default_priority_level: 2 }`,
      },
    ]);
    remove = repo.remove;
    server = await startTestServer([repo.dir]);
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  const infer = (model: string, input: Record<string, unknown>, parameters: Record<string, unknown> = {}) =>
    postJson(`${server.url}/v2/models/${model}/infer`, { parameters, inputs: [{ name: 'INPUT0', ...input }] });

  it('batches BYTES requests of equal shape and gives each its own strings; other shapes go in their own batches', async () => {
    const requests = Array.from({ length: 20 }, (_, i) => (i % 5 === 4 ? [`odd-${i}`, 'x'.repeat(i), ''] : [`r${i}`, 'é'.repeat(i % 3)]));
    const responses = await Promise.all(requests.map((data) => infer('text', { datatype: 'BYTES', shape: [1, data.length], data })));
    responses.forEach((r, i) => {
      expect(r.status).toBe(200);
      expect(r.json.outputs[0].shape).toEqual([1, requests[i]!.length]);
      expect(r.json.outputs[0].data).toEqual(requests[i]);
    });
    const stats = (await getJson(`${server.url}/v2/models/text/stats`)).model_stats[0];
    expect(stats.inference_count).toBe(20);
    expect(stats.execution_count).toBeLessThan(20);
    expect(Math.max(...stats.batch_stats.map((b: { batch_size: number }) => b.batch_size))).toBeGreaterThan(1);
  });

  it('serves any priority: 0 or one beyond priority_levels runs at the default level, as Triton does', async () => {
    const data = [1, 2];
    for (const priority of [1, 2, 0, 3, 1000]) {
      const response = await infer('ranked', { datatype: 'FP32', shape: [1, 2], data }, { priority });
      expect(response.status).toBe(200);
      expect(response.json.outputs[0].data).toEqual(data);
    }
    const stats = (await getJson(`${server.url}/v2/models/ranked/stats`)).model_stats[0];
    expect(stats.inference_stats.success.count).toBe(5);
    expect(stats.inference_stats.fail.count).toBe(0);
  });
});
