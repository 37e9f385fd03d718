/**
 * Triton's `ensemble_scheduling { max_inflight_requests: N }` on a real server: each step of the
 * ensemble has at most N requests in flight across all the ensemble's requests (a decoupled step's
 * until its final response), in a decoupled ensemble and in one that is not; a request cancelled
 * while it waits for a step's slot leaves at once and the slot's next user goes on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, type InferRequest } from '@batchwise/client';
import { PIPELINE_MODELS } from './support/decoupled-ensembles.ts';
import { readMetric } from './support/metrics.ts';
import { serveModels, type ServedModels } from './support/server.ts';
import { waitFor } from './support/wait-for.ts';

const limited = (name: string, config: string, max: number) =>
  config
    .replace(/name: "[^"]+"/, `name: "${name}"`)
    .replace('ensemble_scheduling {', `ensemble_scheduling { max_inflight_requests: ${max}`);

const pipelineConfig = PIPELINE_MODELS.find((m) => m.name === 'pipeline')!.config!;
/** relay_one alone: one request an execution, two instances, so that two requests run at once unless the limit holds one back. */
const RELAY_ONE_ONLY = (name: string, max: number) => `name: "${name}"
platform: "ensemble"
max_batch_size: 1
input [ { name: "N" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "DATA" data_type: TYPE_UINT8 dims: [ -1 ] } ]
output [ { name: "N_OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
ensemble_scheduling { max_inflight_requests: ${max} step [
  { model_name: "relay_one" model_version: -1 input_map { key: "N" value: "N" } input_map { key: "DATA" value: "DATA" } output_map { key: "N_OUT" value: "N_OUT" } }
] }
`;

let served: ServedModels;
let grpc: GrpcClient;

beforeAll(async () => {
  served = await serveModels([
    ...PIPELINE_MODELS,
    { name: 'limited_pipeline', config: limited('limited_pipeline', pipelineConfig, 1) },
    { name: 'limited_relay', config: RELAY_ONE_ONLY('limited_relay', 1) },
  ]);
  grpc = new GrpcClient({ url: `127.0.0.1:${served.server.grpcPort}` });
});
afterAll(async () => {
  await grpc?.close();
  await served?.close();
});

const count = (model: string, n: number, parameters: Record<string, string | number | boolean>): InferRequest => ({
  model,
  inputs: [{ name: 'COUNT', datatype: 'INT32', shape: [1, 1], data: [n] }],
  parameters,
});

/** The N of each response of one request through a streamer pipeline. */
async function ns(request: InferRequest): Promise<number[]> {
  const out: number[] = [];
  for await (const result of grpc.streamResponses(request)) {
    const n = result.outputs.find((o) => o.name === 'N');
    if (n) out.push(Number((n.data as Int32Array)[0]));
  }
  return out;
}

async function relayStats(model = 'relay') {
  const stats = (await served.client.modelStatistics(model))[0]!;
  return { executions: stats.execution_count, inferences: stats.inference_count };
}

describe('max_inflight_requests', () => {
  it('a decoupled step: the next request’s step starts only after the last one’s final response (unlimited, they batch)', async () => {
    // mode batch: the streamer answers with how many requests its execute() had.
    const both = (model: string) => Promise.all([ns(count(model, 0, { mode: 'batch' })), ns(count(model, 0, { mode: 'batch' }))]);
    // Unlimited, two requests sent together share one execute() (within the streamer's 20 ms delay; tried up to three times on a busy machine).
    let unlimited = await both('pipeline');
    for (let attempt = 1; attempt < 3 && unlimited[0]![0] !== 2; attempt++) unlimited = await both('pipeline');
    expect(unlimited).toEqual([[2], [2]]);
    expect(await both('limited_pipeline')).toEqual([[1], [1]]);
  });

  it('the step after a decoupled one: one relay request at a time, the responses in order (unlimited, they batch)', async () => {
    const executionsFor = async (model: string) => {
      const before = await relayStats();
      expect(await ns(count(model, 4, { delay_ms: 100 }))).toEqual([0, 1, 2, 3]);
      const after = await relayStats();
      expect(after.inferences - before.inferences).toBe(4);
      return after.executions - before.executions;
    };
    expect(await executionsFor('pipeline')).toBeLessThan(4);
    expect(await executionsFor('limited_pipeline')).toBe(4);
  });

  it('an ensemble without a decoupled step; a request cancelled while it waits for the slot leaves, and the next goes on', async () => {
    const url = `${served.server.url}/v2/models/limited_relay/infer`;
    const body = (n: number, delayMs: number) =>
      JSON.stringify({
        inputs: [
          { name: 'N', datatype: 'INT32', shape: [1, 1], data: [n] },
          { name: 'DATA', datatype: 'UINT8', shape: [1, 1], data: [n] },
        ],
        parameters: { delay_ms: delayMs },
      });
    const nOf = async (response: Response) => ((await response.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data[0];
    const canceledBefore = await readMetric(
      served.server.metricsPort,
      'nv_inference_request_failure',
      'limited_relay',
      'reason="CANCELED"',
    );
    const before = await relayStats('relay_one');
    // The first holds the step's slot for 2 s; the second, sent well after it, waits for the slot and is cancelled there.
    const first = fetch(url, { method: 'POST', body: body(1, 2000) });
    const pause = () => new Promise((resolve) => setTimeout(resolve, 500));
    await pause();
    const abort = new AbortController();
    const second = fetch(url, { method: 'POST', body: body(2, 0), signal: abort.signal }).catch((e: Error) => e.name);
    await pause();
    abort.abort();
    expect(await second).toBe('AbortError');
    await waitFor(
      async () =>
        (await readMetric(served.server.metricsPort, 'nv_inference_request_failure', 'limited_relay', 'reason="CANCELED"')) ===
        canceledBefore + 1,
      10_000,
      'the waiting request counted CANCELED',
    );
    expect(await nOf(await first)).toBe(1);
    expect(await nOf(await fetch(url, { method: 'POST', body: body(3, 0) }))).toBe(3);
    const after = await relayStats('relay_one');
    // The cancelled request never reached the step model (whose second instance was free): two inferences.
    expect(after).toEqual({ executions: before.executions + 2, inferences: before.inferences + 2 });
  });
});
