/**
 * Differential test of the traffic paths of issues 18 and 19: batches a latency objective forms,
 * batches that wait for a rate limiter's resource (two models sharing a count of 1), and requests a
 * canary split sends to either version. Every answer must equal ONNX Runtime's, run in-process on
 * the same inputs, bit for bit (the harness of test/differential.test.ts), over mixed transports,
 * with requests sent concurrently so that they share batches.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serializeModel } from '@batchwise/modelgen';
import {
  configText,
  differences,
  onnxModel,
  Reference,
  requestArbitrary,
  variableDims,
  type DiffRequest,
  type ModelSpec,
} from './support/differential.ts';
import { openTransports, type Transport } from './support/differential-transports.ts';
import { getJson, serveModels, type ServedModels } from './support/server.ts';

const RUNS = Number(process.env['DIFFERENTIAL_RUNS'] ?? 6);
const SEED = Number(process.env['DIFFERENTIAL_SEED'] ?? 18);

/** A - B and A, B side by side: a server that mixed rows of different requests answers differently. */
const SPEC: ModelSpec = {
  name: 'traffic',
  maxBatchSize: 8,
  inputs: [
    { name: 'A', datatype: 'FP32', dims: [-1] },
    { name: 'B', datatype: 'FP32', dims: [-1] },
  ],
  outputs: [
    { name: 'CONCAT', datatype: 'FP32', dims: [-1] },
    { name: 'MIX', datatype: 'FP32', dims: [-1] },
  ],
  graph: (g) => {
    g.op('Concat', ['A', 'B'], 'CONCAT', { axis: -1 });
    g.op('Sub', ['A', 'B'], 'MIX');
  },
};

const ONE_CPU_INSTANCE = 'instance_group [ { kind: KIND_CPU, count: 1 } ]';
const config = (name: string) => configText({ ...SPEC, name });
const rateLimited = (name: string) =>
  config(name).replace(
    ONE_CPU_INSTANCE,
    'instance_group [ { kind: KIND_CPU, count: 1, rate_limiter { resources [ { name: "r", count: 1 } ] } } ]',
  );
/** Long enough that nothing is shed on a busy machine: the batches still form by the objective. */
const OBJECTIVE = '\nparameters { key: "batchwise_latency_objective_ms" value: { string_value: "2000" } }';
const CANARY = { stable_version: '1', canary_version: '2', canary_weight: 50, stickiness: 'none' };

describe('traffic control answers as ONNX Runtime in-process does (differential)', () => {
  let served: ServedModels;
  let transports: ReturnType<typeof openTransports>;
  let reference: Reference;

  beforeAll(async () => {
    expect(rateLimited('x')).not.toBe(config('x'));
    const model = onnxModel(SPEC);
    served = await serveModels(
      [
        { name: 'objective', model, config: config('objective') + OBJECTIVE },
        { name: 'limited_a', model, config: rateLimited('limited_a') },
        { name: 'limited_b', model, config: rateLimited('limited_b') },
        { name: 'canary', model, config: config('canary'), versions: [1, 2], files: { 'canary.json': JSON.stringify(CANARY) } },
      ],
      { rateLimit: 'execution_count' },
    );
    transports = openTransports(served);
    reference = await Reference.create(SPEC, serializeModel(model));
  });
  afterAll(async () => {
    await transports?.close();
    await served?.close();
    await reference?.release();
  });

  async function check(transport: Transport, request: DiffRequest): Promise<void> {
    const outcome = await transport.infer(request);
    if ('error' in outcome) throw new Error(`${transport.name} -> ${request.model}: ${outcome.error.status}: ${outcome.error.message}`);
    const problems = differences(await reference.run(request), outcome.outputs, transport.wire);
    if (problems.length > 0) throw new Error(`${transport.name} -> ${request.model}: ${problems.join('; ')}`);
  }

  /** Concurrent groups of requests of one shape, each to one of `models` over one of the transports. */
  async function sendGroups(models: readonly string[]): Promise<void> {
    const all = transports.all;
    const groups = variableDims(SPEC).chain((dims) =>
      fc.array(
        fc
          .tuple(fc.constantFrom(...models), fc.integer({ min: 0, max: all.length - 1 }))
          .chain(([model, t]) => requestArbitrary({ ...SPEC, name: model }, all[t]!.wire, dims).map((r) => [t, r] as const)),
        { minLength: 4, maxLength: 8 },
      ),
    );
    await fc.assert(
      fc.asyncProperty(groups, async (group) => {
        await Promise.all(group.map(([t, request]) => check(all[t]!, request)));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  }

  const stats = async (model: string, version?: string) =>
    (await getJson(`${served.server.url}/v2/models/${model}${version ? `/versions/${version}` : ''}/stats`)).model_stats[0];

  it('batches formed by a latency objective', async () => {
    await sendGroups(['objective']);
    const s = await stats('objective');
    expect(s.batchwise_latency_objective.objective_ms).toBe(2000);
    expect(s.batchwise_latency_objective.shed).toEqual({ admission: 0, queued: 0 });
    // Fewer executions than successful requests: some batch held several requests.
    expect(s.execution_count).toBeLessThan(s.inference_stats.success.count);
  }, 120_000);

  it('batches of two models that take turns with one rate limiter resource', async () => {
    await sendGroups(['limited_a', 'limited_b']);
    const [a, b] = [await stats('limited_a'), await stats('limited_b')];
    // Every execution went through the limiter (a grant whose batch may still wait for its delay is handed back, and counted too).
    for (const s of [a, b]) expect(s.batchwise_rate_limiter_wait.count).toBeGreaterThanOrEqual(s.execution_count);
    expect(a.execution_count + b.execution_count).toBeLessThan(a.inference_stats.success.count + b.inference_stats.success.count);
  }, 120_000);

  it('requests a canary split sends to either version', async () => {
    await sendGroups(['canary']);
    const [v1, v2] = [await stats('canary', '1'), await stats('canary', '2')];
    // Both versions answered (at 50%, all of 24 or more requests on one side would be 1 in 2^23).
    expect(v1.inference_stats.success.count).toBeGreaterThan(0);
    expect(v2.inference_stats.success.count).toBeGreaterThan(0);
  }, 120_000);
});
