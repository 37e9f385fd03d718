import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { slowModel } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { getJson, postJson, startTestServer } from './support/server.ts';

const WIDTH = 256;

describe('latency objective (batchwise_latency_objective_ms) through a real server', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([
      {
        name: 'objective',
        // 2000 chained 256x256 matmuls: a run takes milliseconds on any machine, well past the 1 ms objective.
        model: slowModel({ repeats: 2000, width: WIDTH }),
        config: `name: "objective"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
dynamic_batching { }
parameters { key: "batchwise_latency_objective_ms" value: { string_value: "1" } }`,
      },
    ]);
    remove = repo.remove;
    server = await startTestServer([repo.dir]);
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  const send = () =>
    postJson(`${server.url}/v2/models/objective/infer`, {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, WIDTH], data: Array(WIDTH).fill(0.5) }],
    });

  it('answers the first request (no run time known yet), then refuses one that cannot make it with 503 naming the objective', async () => {
    expect((await send()).status).toBe(200);
    const refused = await send();
    expect(refused.status).toBe(503);
    expect(refused.json.error).toBe("request would miss the latency objective of 1 ms for model 'objective'");

    const stats = (await getJson(`${server.url}/v2/models/objective/stats`)).model_stats[0];
    expect(stats.inference_stats.fail.count).toBe(1);
    const objective = stats.batchwise_latency_objective;
    expect(objective).toMatchObject({ objective_ms: 1, shed: { admission: 1, queued: 0 }, target_batch_size: 1 });
    expect(objective.profile).toHaveLength(1);
    expect(objective.profile[0].by_batch_size[0].batch_size).toBe(1);
    expect(objective.profile[0].by_batch_size[0].ms).toBeGreaterThan(1);

    const metrics = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
    const labels = 'model="objective",version="1"';
    expect(metrics).toContain(`batchwise_latency_objective_seconds{${labels}} 0.001\n`);
    expect(metrics).toContain(`batchwise_latency_objective_shed_total{${labels},reason="admission"} 1\n`);
    expect(metrics).toContain(`batchwise_latency_objective_shed_total{${labels},reason="queued"} 0\n`);
    expect(metrics).toContain(`nv_inference_request_failure{${labels},reason="REJECTED"} 1\n`);
    expect(metrics).toMatch(
      new RegExp(`batchwise_latency_objective_profile_seconds\\{${labels},instance="0",term="per_sample"\\} 0\\.\\d+`),
    );
    expect(metrics).toContain(`batchwise_latency_objective_target_batch_size{${labels}} 1\n`);
    expect(metrics).toContain(`batchwise_latency_objective_arrival_rate{${labels}} `);
  });
});
