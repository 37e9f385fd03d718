/**
 * Ensembles in Triton's lifecycle, explicit mode: loading an ensemble loads its steps, the
 * ensemble is ready only while they are, unload_dependents, model_version -1, a step reloaded
 * under ensemble traffic failing nothing, and the request's queue timeout applying at each step.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpClient } from '@batchwise/client';
import { serializeModel, simpleAddSub, slowModel } from '@batchwise/modelgen';
import { mkdir, mkdtemp, rename, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { makeRepository } from './support/repository.ts';
import { waitFor } from './support/wait-for.ts';
import { readMetric } from './support/metrics.ts';
import { startTestServer } from './support/server.ts';

const SIMPLE = (name: string, extra = '') => `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
${extra}`;

const ADD = (name: string, step: string, version = -1) => `name: "${name}"
platform: "ensemble"
max_batch_size: 8
input [ { name: "A" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "B" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "SUM" data_type: TYPE_INT32 dims: [ 16 ] } ]
ensemble_scheduling {
  step [ { model_name: "${step}" model_version: ${version} input_map { key: "INPUT0" value: "A" } input_map { key: "INPUT1" value: "B" } output_map { key: "OUTPUT0" value: "SUM" } } ]
}
`;

const WIDTH = 64;
const SLOW = `name: "slow"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
dynamic_batching { default_queue_policy { default_timeout_microseconds: 60000000 allow_timeout_override: true } }
`;
const SLOW_ENSEMBLE = `name: "slow_ensemble"
platform: "ensemble"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
ensemble_scheduling { step [ { model_name: "slow" model_version: -1 input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "Y" } } ] }
`;

const ints = (f: (i: number) => number) => Int32Array.from({ length: 16 }, (_, i) => f(i));

/** A JavaScript identity over 4 floats, batching (max_batch_size 8) or not. */
const FLEX = (maxBatchSize: number) => `name: "flex"
backend: "js"
max_batch_size: ${maxBatchSize}
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
`;
const FLEX_CODE = `import { tensor } from '@batchwise/backend';
export default { execute: (requests) => requests.map((r) => ({ outputs: [tensor('OUTPUT0', 'FP32', r.inputs.INPUT0.shape, r.inputs.INPUT0.data)] })) };
`;
const OVER_FLEX = `name: "over_flex"
platform: "ensemble"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [ { model_name: "flex" model_version: -1 input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "Y" } } ] }
`;

describe('ensembles in explicit mode', () => {
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let http: HttpClient;

  beforeAll(async () => {
    repo = await makeRepository([
      { name: 'simple', model: simpleAddSub(), config: SIMPLE('simple', 'dynamic_batching { }') },
      { name: 'add', config: ADD('add', 'simple') },
      { name: 'add_again', config: ADD('add_again', 'simple') },
      {
        name: 'versioned',
        model: simpleAddSub(),
        config: SIMPLE('versioned', 'version_policy: { all { } }'),
        versions: [1, 2],
      },
      { name: 'add_latest', config: ADD('add_latest', 'versioned') },
      { name: 'add_first', config: ADD('add_first', 'versioned', 1) },
      { name: 'slow', model: slowModel({ repeats: 12000, width: WIDTH }), config: SLOW },
      { name: 'slow_ensemble', config: SLOW_ENSEMBLE },
      { name: 'flex', config: FLEX(0), files: { '1/model.mjs': FLEX_CODE } },
      { name: 'over_flex', config: OVER_FLEX },
    ]);
    server = await startTestServer([repo.dir], { modelControlMode: 'explicit', loadModels: [], strictReadiness: false });
    http = new HttpClient({ url: server.url });
  });
  afterAll(async () => {
    await http?.close();
    await server?.close();
    await repo?.remove();
  });

  const add = (model: string, a = ints((i) => i), b = ints(() => 1)) =>
    http.infer({
      model,
      inputs: [
        { name: 'A', datatype: 'INT32', shape: [1, 16], data: a },
        { name: 'B', datatype: 'INT32', shape: [1, 16], data: b },
      ],
    });

  it('loading an ensemble loads its step models', async () => {
    expect(await http.isModelReady('simple')).toBe(false);
    await http.loadModel('add');
    expect(await http.isModelReady('add')).toBe(true);
    expect(await http.isModelReady('simple')).toBe(true);
    const result = await add('add');
    expect(Array.from(result.outputs[0]!.data as Int32Array)).toEqual(Array.from(ints((i) => i + 1)));
  });

  it('is ready only while its steps are, and says which step is not', async () => {
    await http.unloadModel('simple');
    expect(await http.isModelReady('add')).toBe(false);
    const row = (await http.repositoryIndex()).find((e) => e.name === 'add')!;
    expect(row).toMatchObject({ state: 'UNAVAILABLE' });
    expect(row.reason).toMatch(/step 1's model 'simple' is not ready/);
    await expect(add('add')).rejects.toThrow(/'add' has no available versions.*model 'simple' is not ready/);
    // The step comes back: so does the ensemble, without being loaded again.
    await http.loadModel('simple');
    expect(await http.isModelReady('add')).toBe(true);
    expect((await add('add')).outputs[0]!.shape).toEqual([1, 16]);
  });

  it('unload_dependents unloads the steps no other loaded ensemble uses', async () => {
    await http.loadModel('add_again');
    await http.unloadModel('add', { unloadDependents: true });
    expect(await http.isModelReady('simple')).toBe(true); // add_again still uses it
    await http.unloadModel('add_again', { unloadDependents: true });
    expect(await http.isModelReady('simple')).toBe(false);
    expect(await http.isModelReady('add_again')).toBe(false);
  });

  it("model_version -1 follows the step model's latest ready version; a fixed version stays", async () => {
    await http.loadModel('add_latest');
    await http.loadModel('add_first');
    const count = async (version: string) => (await http.modelStatistics('versioned', version))[0]!.inference_count;
    const before = [await count('1'), await count('2')];
    await add('add_latest');
    await add('add_first');
    await add('add_first');
    expect([(await count('1')) - before[0]!, (await count('2')) - before[1]!]).toEqual([2, 1]);
  });

  it('a step model reloaded under ensemble traffic fails no request', async () => {
    await http.loadModel('add');
    let stop = false;
    let done = 0;
    const failures: string[] = [];
    const worker = async () => {
      while (!stop) {
        await add('add').then(
          () => done++,
          (error: Error) => failures.push(error.message),
        );
      }
    };
    const workers = Array.from({ length: 8 }, worker);
    for (let i = 0; i < 3; i++) {
      await new Promise((resolve) => setTimeout(resolve, 150));
      const delay = 100 * (i + 1);
      await http.loadModel('simple', {
        config: JSON.stringify({
          name: 'simple',
          platform: 'onnxruntime_onnx',
          max_batch_size: 8,
          input: [
            { name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] },
            { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [16] },
          ],
          output: [
            { name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [16] },
            { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [16] },
          ],
          dynamic_batching: { max_queue_delay_microseconds: delay },
        }),
      });
      expect(((await http.modelConfig('simple')) as any).dynamic_batching.max_queue_delay_microseconds).toBe(delay);
    }
    await new Promise((resolve) => setTimeout(resolve, 150));
    stop = true;
    await Promise.all(workers);
    expect(failures).toEqual([]);
    expect(done).toBeGreaterThan(20);
  });

  it('a step model loaded again with another config reloads the ensembles over it (Triton reloads dependents)', async () => {
    await http.loadModel('over_flex');
    const x = Float32Array.of(1.5, -2, 0.25, 8);
    const y = async () => {
      const result = await http.infer({ model: 'over_flex', inputs: [{ name: 'X', datatype: 'FP32', shape: [4], data: x }] });
      return { shape: result.outputs[0]!.shape, data: Array.from(result.outputs[0]!.data as Float32Array) };
    };
    expect(await y()).toEqual({ shape: [4], data: Array.from(x) });
    // The step now batches: the ensemble, which does not, must give its tensors a batch dimension there and take it off after.
    await writeFile(join(repo.dir, 'flex', 'config.pbtxt'), FLEX(8));
    await http.loadModel('flex');
    expect(await y()).toEqual({ shape: [4], data: Array.from(x) });
    const [flex] = await http.modelStatistics('flex');
    expect(flex!.batch_stats.map((b) => b.batch_size)).toEqual([1]);
  });

  it("the request's queue timeout applies at each step", async () => {
    await http.loadModel('slow_ensemble');
    const input = (name: string, rows = 1) => [
      { name, datatype: 'FP32' as const, shape: [rows, WIDTH], data: new Float32Array(rows * WIDTH).fill(0.5) },
    ];
    await http.infer({ model: 'slow_ensemble', inputs: input('X') }); // warm
    // The slow model's one instance runs a full batch (8 rows, max_batch_size) while another waits for
    // it: seen in the pending count, not guessed from a pause that a busy machine stretches...
    const busy = [1, 2].map(() => http.infer({ model: 'slow', inputs: input('INPUT0', 8) }));
    await waitFor(
      async () => (await readMetric(server.metricsPort, 'nv_inference_pending_request_count', 'slow')) === 1,
      10_000,
      'one queued',
    );
    // ...so an ensemble request allowing 5 ms in a queue, which cannot join that batch, times out in the step's queue.
    const timedOut = http.infer({ model: 'slow_ensemble', inputs: input('X'), parameters: { timeout: 5000 } });
    await expect(timedOut).rejects.toThrow(/^in ensemble 'slow_ensemble', .*[Tt]imeout/);
    await Promise.all(busy);
    const [slow] = await http.modelStatistics('slow');
    expect(slow!.inference_stats.fail.count).toBeGreaterThanOrEqual(1);
  });
});

describe('ensembles in poll mode', () => {
  it('an ensemble that failed for a missing step loads once a poll finds the step', async () => {
    const repo = await makeRepository([{ name: 'add', config: ADD('add', 'simple') }]);
    const server = await startTestServer([repo.dir], { modelControlMode: 'poll', repositoryPollSecs: 1, strictReadiness: false });
    const http = new HttpClient({ url: server.url });
    try {
      const row = (await http.repositoryIndex()).find((e) => e.name === 'add')!;
      expect(row.state).toBe('UNAVAILABLE');
      expect(row.reason).toMatch(/step 1 \(model 'simple'\): the step's model is not available/);
      // Written beside the repository and moved in at once, so no poll sees half a model.
      const staged = await mkdtemp(join(tmpdir(), 'batchwise-step-'));
      await mkdir(join(staged, '1'));
      await writeFile(join(staged, '1', 'model.onnx'), serializeModel(simpleAddSub()));
      await writeFile(join(staged, 'config.pbtxt'), SIMPLE('simple'));
      await rename(staged, join(repo.dir, 'simple'));
      await waitFor(() => http.isModelReady('add'), 15_000, "ensemble 'add' ready after its step appeared");
      const result = await http.infer({
        model: 'add',
        inputs: [
          { name: 'A', datatype: 'INT32', shape: [1, 16], data: ints((i) => i) },
          { name: 'B', datatype: 'INT32', shape: [1, 16], data: ints(() => 2) },
        ],
      });
      expect(Array.from(result.outputs[0]!.data as Int32Array)).toEqual(Array.from(ints((i) => i + 2)));
    } finally {
      await http.close();
      await server.close();
      await repo.remove();
    }
  });
});
