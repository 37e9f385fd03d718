import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity, slowModel } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { postJson, startTestServer, getJson } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const WIDTH = 256;
const SLOW = (name: string, extra: string) => `
name: "${name}"
max_batch_size: 16
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
${extra}`;

describe('dynamic batching over HTTP', () => {
  let server: Server;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([
      {
        name: 'batched',
        model: identity('FP32', [4]),
        config: `name: "batched"
max_batch_size: 32
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 20000 }`,
      },
      { name: 'bounded', model: slowModel({ repeats: 2000, width: WIDTH }), config: SLOW('bounded', 'dynamic_batching { default_queue_policy { max_queue_size: 2 } }') },
      {
        name: 'deadline',
        model: slowModel({ repeats: 60000, width: WIDTH }),
        // A request may only shorten the default timeout (Triton), so the default is long and the request asks for 100 ms.
        config: SLOW('deadline', 'dynamic_batching { default_queue_policy { allow_timeout_override: true default_timeout_microseconds: 60000000 } }'),
      },
    ]);
    remove = repo.remove;
    server = await startTestServer([repo.dir]);
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  const send = (model: string, values: number[], parameters: Record<string, unknown> = {}) =>
    postJson(`${server.url}/v2/models/${model}/infer`, {
      parameters,
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [values.length / (model === 'batched' ? 4 : WIDTH), model === 'batched' ? 4 : WIDTH], data: values }],
    });

  it('forms batches from concurrent requests and gives each request its own rows', async () => {
    const requests = Array.from({ length: 24 }, (_, i) => [i, i + 0.25, i + 0.5, i + 0.75]);
    const responses = await Promise.all(requests.map((values) => send('batched', values)));
    responses.forEach((r, i) => {
      expect(r.status).toBe(200);
      expect(r.json.outputs[0].data).toEqual(requests[i]);
    });
    const stats = (await getJson(`${server.url}/v2/models/batched/stats`)).model_stats[0];
    expect(stats.inference_count).toBe(24);
    expect(stats.execution_count).toBeLessThan(24);
    expect(Math.max(...stats.batch_stats.map((b: any) => b.batch_size))).toBeGreaterThan(1);
    const metrics = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
    const value = (name: string) => Number(new RegExp(`^${name}\\{model="batched",version="1"\\} (\\S+)`, 'm').exec(metrics)?.[1]);
    expect(value('nv_inference_exec_count')).toBeLessThan(value('nv_inference_request_success'));
    expect(metrics).toMatch(/batchwise_inference_batch_size_bucket\{le="32",model="batched",version="1"\} 24|batchwise_inference_batch_size_count\{model="batched",version="1"\} \d+/);
  });

  it('refuses at once with 503 when the queue is full', async () => {
    const row = new Array(WIDTH).fill(0.5);
    const responses = await Promise.all(Array.from({ length: 8 }, () => send('bounded', row)));
    const rejected = responses.filter((r) => r.status === 503);
    expect(rejected.length).toBeGreaterThan(0);
    expect(rejected[0]!.json.error).toBe('Exceeds maximum queue size');
    expect(responses.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(3);
  });

  it('times a request out at its deadline while the instance is busy', async () => {
    const row = new Array(WIDTH).fill(0.5);
    const busy = send('deadline', row);
    await new Promise((r) => setTimeout(r, 50));
    const started = Date.now();
    const timedOut = await send('deadline', row, { timeout: 100_000 });
    const waitedMs = Date.now() - started;
    expect(timedOut.status).toBe(503);
    expect(timedOut.json.error).toBe('Request timeout expired');
    expect(waitedMs).toBeLessThan(400);
    expect((await busy).status).toBe(200);
  });
});
