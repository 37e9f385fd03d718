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
      {
        name: 'bounded',
        model: slowModel({ repeats: 2000, width: WIDTH }),
        config: SLOW('bounded', 'dynamic_batching { default_queue_policy { max_queue_size: 2 } }'),
      },
      {
        name: 'deadline',
        model: slowModel({ repeats: 60000, width: WIDTH }),
        // A request may only shorten the default timeout (Triton), so the default is long and the request asks for 100 ms.
        config: SLOW(
          'deadline',
          'dynamic_batching { default_queue_policy { allow_timeout_override: true default_timeout_microseconds: 60000000 } }',
        ),
      },
    ]);
    remove = repo.remove;
    server = await startTestServer([repo.dir]);
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  /** The metrics endpoint now, read as `value(name, extraLabels)` for one model's version 1. */
  const metricReader = async (model: string) => {
    const lines = (await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text()).split('\n');
    return (name: string, extraLabels = '') => {
      const prefix = name.endsWith('_bucket')
        ? `${name}{${extraLabels}model="${model}",version="1"} `
        : `${name}{model="${model}",version="1"${extraLabels}} `;
      const line = lines.find((l) => l.startsWith(prefix));
      return line === undefined ? undefined : Number(line.slice(prefix.length));
    };
  };

  const send = (model: string, values: number[], parameters: Record<string, unknown> = {}) =>
    postJson(`${server.url}/v2/models/${model}/infer`, {
      parameters,
      inputs: [
        {
          name: 'INPUT0',
          datatype: 'FP32',
          shape: [values.length / (model === 'batched' ? 4 : WIDTH), model === 'batched' ? 4 : WIDTH],
          data: values,
        },
      ],
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
    const value = await metricReader('batched');
    expect(value('nv_inference_request_success')).toBe(24);
    expect(value('nv_inference_exec_count')).toBe(stats.execution_count);
    // The batch-size histogram saw every execution, and every sample once.
    expect(value('batchwise_inference_batch_size_count')).toBe(stats.execution_count);
    expect(value('batchwise_inference_batch_size_sum')).toBe(24);
    expect(value('batchwise_inference_batch_size_bucket', 'le="32",')).toBe(stats.execution_count);
    expect(value('batchwise_inference_batch_size_bucket', 'le="1",')).toBe(
      stats.batch_stats.find((b: any) => b.batch_size === 1)?.compute_infer.count ?? 0,
    );
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
    const answered: string[] = [];
    const tracked = (name: string, rows: number, parameters: Record<string, unknown> = {}) =>
      send('deadline', new Array(rows).fill(row).flat(), parameters).then((r) => (answered.push(name), r));
    // One runs and two wait: whenever the timed request arrives, a whole run (far longer
    // than its 100 ms) is still ahead of it, without any assumption about this machine's speed.
    // No two of them fit in one batch (max_batch_size 16), so however and in whatever order
    // they arrive (in one turn of the server's event loop, where they would otherwise form one
    // batch, or in several), one runs and the other two wait, each for a run of its own.
    const ahead = [tracked('first', 9), tracked('second', 9), tracked('third', 9)];
    for (let polls = 0; (await metricReader('deadline'))('nv_inference_pending_request_count') !== 2; polls++) {
      expect(polls).toBeLessThan(2000);
      await new Promise((r) => setTimeout(r, 5));
    }
    const timedOut = await tracked('timed', 1, { timeout: 100_000 });
    expect(timedOut.status).toBe(503);
    expect(timedOut.json.error).toBe('Request timeout expired');
    // Served in turn it would come after all three; it left the queue with at least two still unanswered.
    expect(answered.filter((name) => name !== 'timed').length).toBeLessThanOrEqual(1);
    expect((await Promise.all(ahead)).map((r) => r.status)).toEqual([200, 200, 200]);
    const stats = (await getJson(`${server.url}/v2/models/deadline/stats`)).model_stats[0];
    expect([stats.inference_stats.success.count, stats.inference_stats.fail.count]).toEqual([3, 1]);
    // Labels sorted by name, as Triton writes them: the reason between model and version.
    const failures = (await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text())
      .split('\n')
      .find((l) => l.startsWith('nv_inference_request_failure{model="deadline",reason="REJECTED",version="1"} '));
    expect(Number(failures?.split(' ')[1])).toBe(1);
  });
});
