/**
 * Triton ensembles (`platform: "ensemble"`) on real servers: answers equal to the same models
 * chained in-process by ONNX Runtime, every load-time validation error, branches that overlap
 * in time, failure of a step, batching at a step, readiness and the lifecycle in explicit mode.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, HttpClient } from '@batchwise/client';
import { identity, serializeModel, simpleAddSub } from '@batchwise/modelgen';
import { loadOrt } from '@batchwise/modelgen/test-support/ort.ts';
import { makeRepository, type RepositoryModel } from './support/repository.ts';
import { postJson, startTestServer } from './support/server.ts';

const SIMPLE_CONFIG = (name: string, extra = '') => `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
${extra}`;

interface StepText {
  model: string;
  version?: number;
  inputs: Record<string, string>;
  outputs: Record<string, string>;
}

function ensembleConfig(name: string, options: { maxBatchSize?: number; inputs: string; outputs: string; steps: StepText[] }): string {
  const map = (kind: string, m: Record<string, string>) =>
    Object.entries(m)
      .map(([k, v]) => `${kind} { key: "${k}" value: "${v}" }`)
      .join(' ');
  const steps = options.steps
    .map(
      (s) => `{ model_name: "${s.model}" model_version: ${s.version ?? -1} ${map('input_map', s.inputs)} ${map('output_map', s.outputs)} }`,
    )
    .join(',\n    ');
  return `name: "${name}"
platform: "ensemble"
max_batch_size: ${options.maxBatchSize ?? 8}
input [ ${options.inputs} ]
output [ ${options.outputs} ]
ensemble_scheduling {
  step [
    ${steps}
  ]
}
`;
}

const INT_IN = (name: string, dims = '[ 16 ]') => `{ name: "${name}" data_type: TYPE_INT32 dims: ${dims} }`;

/** A: (A+B), (A-B) through simple, then simple again: 2A and 2B, from two steps in a chain. */
const CHAIN = ensembleConfig('chain', {
  inputs: `${INT_IN('A')}, ${INT_IN('B')}`,
  outputs: `${INT_IN('TWICE_A')}, ${INT_IN('TWICE_B')}`,
  steps: [
    { model: 'simple', inputs: { INPUT0: 'A', INPUT1: 'B' }, outputs: { OUTPUT0: 'sum', OUTPUT1: 'diff' } },
    { model: 'simple', inputs: { INPUT0: 'sum', INPUT1: 'diff' }, outputs: { OUTPUT0: 'TWICE_A', OUTPUT1: 'TWICE_B' } },
  ],
});

const WIDTH = 64;
/** A JavaScript branch: waits on a timer (no CPU, so a loaded machine cannot stretch it much), passes X on, reports when it ran. */
const BRANCH_CONFIG = (name: string) => `name: "${name}"
backend: "js"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] }, { name: "TIMES" data_type: TYPE_FP64 dims: [ 2 ] } ]
`;
const BRANCH_JS = `export default {
  async execute(requests) {
    const start = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const end = Date.now();
    return requests.map((r) => {
      const rows = r.inputs.INPUT0.shape[0];
      const times = new Float64Array(rows * 2);
      for (let i = 0; i < rows; i++) times.set([start, end], i * 2);
      return { outputs: [{ ...r.inputs.INPUT0, name: 'OUTPUT0' }, { name: 'TIMES', datatype: 'FP64', shape: [rows, 2], data: times }] };
    });
  },
};
`;
const FP_IN = (name: string) => `{ name: "${name}" data_type: TYPE_FP32 dims: [ ${WIDTH} ] }`;
/** Two slow models reading the same input: independent branches. */
const TIMES = (name: string) => `{ name: "${name}" data_type: TYPE_FP64 dims: [ 2 ] }`;
const BRANCHES = ensembleConfig('branches', {
  inputs: FP_IN('X'),
  outputs: `${FP_IN('LEFT')}, ${FP_IN('RIGHT')}, ${TIMES('LEFT_TIMES')}, ${TIMES('RIGHT_TIMES')}`,
  steps: [
    { model: 'branch_left', inputs: { INPUT0: 'X' }, outputs: { OUTPUT0: 'LEFT', TIMES: 'LEFT_TIMES' } },
    { model: 'branch_right', inputs: { INPUT0: 'X' }, outputs: { OUTPUT0: 'RIGHT', TIMES: 'RIGHT_TIMES' } },
  ],
});

/** The second step takes exactly 4 elements; the third reads what the second produces. */
const FAILING = ensembleConfig('failing', {
  inputs: `{ name: "X" data_type: TYPE_FP32 dims: [ -1 ] }`,
  outputs: `{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }`,
  steps: [
    { model: 'any_fp32', inputs: { INPUT0: 'X' }, outputs: { OUTPUT0: 'x1' } },
    { model: 'four_fp32', inputs: { INPUT0: 'x1' }, outputs: { OUTPUT0: 'x2' } },
    { model: 'last_fp32', inputs: { INPUT0: 'x2' }, outputs: { OUTPUT0: 'Y' } },
  ],
});
const FP32_VAR = (name: string, dims: string) => `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: ${dims} } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: ${dims} } ]
`;

/** Each invalid ensemble and the words its load failure must contain. */
const INVALID: { name: string; config: string; reason: RegExp }[] = [
  {
    name: 'bad_unknown_step',
    config: ensembleConfig('bad_unknown_step', {
      inputs: INT_IN('A'),
      outputs: INT_IN('Z'),
      steps: [{ model: 'no_such_model', inputs: { INPUT0: 'A' }, outputs: { OUTPUT0: 'Z' } }],
    }),
    reason: /ensemble 'bad_unknown_step' step 1 \(model 'no_such_model'\): the step's model is not available/,
  },
  {
    name: 'bad_input_map',
    config: ensembleConfig('bad_input_map', {
      inputs: `${INT_IN('A')}, ${INT_IN('B')}`,
      outputs: INT_IN('Z'),
      steps: [{ model: 'simple', inputs: { INPUT0: 'A', NOPE: 'B' }, outputs: { OUTPUT0: 'Z' } }],
    }),
    reason: /step 1 \(model 'simple'\): input_map names 'NOPE', which is not an input of model 'simple'/,
  },
  {
    name: 'bad_output_map',
    config: ensembleConfig('bad_output_map', {
      inputs: `${INT_IN('A')}, ${INT_IN('B')}`,
      outputs: INT_IN('Z'),
      steps: [{ model: 'simple', inputs: { INPUT0: 'A', INPUT1: 'B' }, outputs: { OUTPUT9: 'Z' } }],
    }),
    reason: /step 1 \(model 'simple'\): output_map names 'OUTPUT9', which is not an output of model 'simple'/,
  },
  {
    name: 'bad_datatype',
    config: ensembleConfig('bad_datatype', {
      inputs: `{ name: "A" data_type: TYPE_FP32 dims: [ 16 ] }, ${INT_IN('B')}`,
      outputs: INT_IN('Z'),
      steps: [{ model: 'simple', inputs: { INPUT0: 'A', INPUT1: 'B' }, outputs: { OUTPUT0: 'Z' } }],
    }),
    reason: /tensor 'A' is FP32 as ensemble input 'A' but INT32 as step 1 \(model 'simple'\) input 'INPUT0'/,
  },
  {
    name: 'bad_shape',
    config: ensembleConfig('bad_shape', {
      inputs: `${INT_IN('A')}, ${INT_IN('B')}`,
      outputs: INT_IN('Z', '[ 8 ]'),
      steps: [{ model: 'simple', inputs: { INPUT0: 'A', INPUT1: 'B' }, outputs: { OUTPUT0: 'Z' } }],
    }),
    reason: /tensor 'Z' has shape \[-1,16\] as step 1 \(model 'simple'\) output 'OUTPUT0' but \[-1,8\] as ensemble output 'Z'/,
  },
  {
    name: 'bad_twice',
    config: ensembleConfig('bad_twice', {
      inputs: `${INT_IN('A')}, ${INT_IN('B')}`,
      outputs: INT_IN('Z'),
      steps: [
        { model: 'simple', inputs: { INPUT0: 'A', INPUT1: 'B' }, outputs: { OUTPUT0: 'Z' } },
        { model: 'simple', inputs: { INPUT0: 'A', INPUT1: 'B' }, outputs: { OUTPUT1: 'Z' } },
      ],
    }),
    reason: /tensor 'Z' is produced twice: by step 1 \(model 'simple'\) and by step 2 \(model 'simple'\)/,
  },
  {
    name: 'bad_cycle',
    config: ensembleConfig('bad_cycle', {
      inputs: INT_IN('A'),
      outputs: INT_IN('Z'),
      steps: [
        { model: 'simple', inputs: { INPUT0: 'A', INPUT1: 'q' }, outputs: { OUTPUT0: 'p', OUTPUT1: 'Z' } },
        { model: 'simple', inputs: { INPUT0: 'p', INPUT1: 'p' }, outputs: { OUTPUT0: 'q' } },
      ],
    }),
    reason: /its steps form a cycle: step 1 \(model 'simple'\) -> step 2 \(model 'simple'\) -> step 1/,
  },
  {
    name: 'bad_unused_input',
    config: ensembleConfig('bad_unused_input', {
      inputs: `${INT_IN('A')}, ${INT_IN('B')}, ${INT_IN('C')}`,
      outputs: INT_IN('Z'),
      steps: [{ model: 'simple', inputs: { INPUT0: 'A', INPUT1: 'B' }, outputs: { OUTPUT0: 'Z' } }],
    }),
    reason: /ensemble input 'C' is not read by any step/,
  },
  {
    name: 'bad_unproduced_output',
    config: ensembleConfig('bad_unproduced_output', {
      inputs: `${INT_IN('A')}, ${INT_IN('B')}`,
      outputs: `${INT_IN('Z')}, ${INT_IN('W')}`,
      steps: [{ model: 'simple', inputs: { INPUT0: 'A', INPUT1: 'B' }, outputs: { OUTPUT0: 'Z' } }],
    }),
    reason: /ensemble output 'W' is not produced by any step/,
  },
  {
    name: 'bad_batch',
    config: ensembleConfig('bad_batch', {
      maxBatchSize: 64,
      inputs: `${INT_IN('A')}, ${INT_IN('B')}`,
      outputs: INT_IN('Z'),
      steps: [{ model: 'simple', inputs: { INPUT0: 'A', INPUT1: 'B' }, outputs: { OUTPUT0: 'Z' } }],
    }),
    reason:
      /ensemble 'bad_batch' allows maximum batch size 64, but it contains model 'simple' which only allows maximum batch size to be 8/,
  },
];

const ints = (n: number, f: (i: number) => number) => Int32Array.from({ length: n }, (_, i) => f(i));

describe('ensembles', () => {
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let http: HttpClient;
  let grpc: GrpcClient;
  let traceDir: string;

  beforeAll(async () => {
    const models: RepositoryModel[] = [
      {
        name: 'simple',
        model: simpleAddSub(),
        config: SIMPLE_CONFIG('simple', 'dynamic_batching { max_queue_delay_microseconds: 20000 }'),
      },
      { name: 'chain', config: CHAIN },
      { name: 'branch_left', config: BRANCH_CONFIG('branch_left'), files: { '1/model.mjs': BRANCH_JS } },
      { name: 'branch_right', config: BRANCH_CONFIG('branch_right'), files: { '1/model.mjs': BRANCH_JS } },
      { name: 'branches', config: BRANCHES },
      { name: 'any_fp32', model: identity('FP32', [-1]), config: FP32_VAR('any_fp32', '[ -1 ]') },
      { name: 'four_fp32', model: identity('FP32', [4]), config: FP32_VAR('four_fp32', '[ 4 ]') },
      { name: 'last_fp32', model: identity('FP32', [-1]), config: FP32_VAR('last_fp32', '[ -1 ]') },
      { name: 'failing', config: FAILING },
      ...INVALID.map(({ name, config }) => ({ name, config })),
    ];
    repo = await makeRepository(models);
    traceDir = await mkdtemp(join(tmpdir(), 'batchwise-ensemble-trace-'));
    server = await startTestServer([repo.dir], {
      strictReadiness: false,
      traceConfig: [`triton,file=${join(traceDir, 'trace.json')}`, 'log-frequency=3'],
    });
    http = new HttpClient({ url: server.url });
    grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
  });
  afterAll(async () => {
    await http?.close();
    await grpc?.close();
    await server?.close();
    await repo?.remove();
    await rm(traceDir, { recursive: true, force: true });
  });

  it('answers as the same models chained in-process by ONNX Runtime, over HTTP JSON, HTTP binary and gRPC', async () => {
    const ort = loadOrt();
    const session = await ort.InferenceSession.create(serializeModel(simpleAddSub()));
    const a = ints(32, (i) => i * 7 - 50);
    const b = ints(32, (i) => (i * i) % 23);
    const first = await session.run({ INPUT0: new ort.Tensor('int32', a, [2, 16]), INPUT1: new ort.Tensor('int32', b, [2, 16]) });
    const second = await session.run({ INPUT0: first['OUTPUT0']!, INPUT1: first['OUTPUT1']! });
    await session.release();
    for (const [client, binary] of [
      [http, false],
      [http, true],
      [grpc, undefined],
    ] as const) {
      const result = await client.infer({
        model: 'chain',
        inputs: [
          { name: 'A', datatype: 'INT32', shape: [2, 16], data: a },
          { name: 'B', datatype: 'INT32', shape: [2, 16], data: b },
        ],
        ...(binary !== undefined && { binary }),
      });
      expect(result.modelName).toBe('chain');
      const byName = new Map(result.outputs.map((o) => [o.name, o]));
      expect(byName.get('TWICE_A')!.shape).toEqual([2, 16]);
      expect(Array.from(byName.get('TWICE_A')!.data as Int32Array)).toEqual(Array.from(second['OUTPUT0']!.data as Int32Array));
      expect(Array.from(byName.get('TWICE_B')!.data as Int32Array)).toEqual(Array.from(second['OUTPUT1']!.data as Int32Array));
    }
  });

  it('shows the ensemble in metadata, config and the repository index as Triton does', async () => {
    const metadata = await http.modelMetadata('chain');
    expect(metadata.platform).toBe('ensemble');
    expect(metadata.inputs.map((i) => [i.name, i.datatype, i.shape])).toEqual([
      ['A', 'INT32', [-1, 16]],
      ['B', 'INT32', [-1, 16]],
    ]);
    for (const client of [http, grpc]) {
      const config = (await client.modelConfig('chain')) as any;
      expect(config.platform).toBe('ensemble');
      expect(config.ensemble_scheduling.step).toHaveLength(2);
      expect(config.ensemble_scheduling.step[0]).toMatchObject({ model_name: 'simple', input_map: { INPUT0: 'A', INPUT1: 'B' } });
    }
    const index = await http.repositoryIndex();
    expect(index.find((e) => e.name === 'chain')).toMatchObject({ state: 'READY', version: '1' });
  });

  it.each(INVALID)('refuses $name at load, naming the ensemble, the step and the tensor', async ({ name, reason }) => {
    const index = await http.repositoryIndex();
    const row = index.find((e) => e.name === name)!;
    expect(row.state).toBe('UNAVAILABLE');
    expect(row.reason).toMatch(reason);
    expect(await http.isModelReady(name)).toBe(false);
  });

  it('a failed ensemble leaves its step models serving', async () => {
    expect(await http.isModelReady('simple')).toBe(true);
    const index = await http.repositoryIndex({ ready: true });
    expect(index.map((e) => e.name)).toEqual(expect.arrayContaining(['simple', 'chain', 'branches']));
  });

  it('runs independent branches at the same time', async () => {
    const x = Float32Array.from({ length: WIDTH }, (_, i) => Math.sin(i));
    const result = await http.infer({ model: 'branches', inputs: [{ name: 'X', datatype: 'FP32', shape: [1, WIDTH], data: x }] });
    const output = (name: string) => result.outputs.find((o) => o.name === name)!;
    expect(Array.from(output('LEFT').data as Float32Array)).toEqual(Array.from(x));
    expect(Array.from(output('RIGHT').data as Float32Array)).toEqual(Array.from(x));
    // Each branch waited 200 ms; run one after the other, one would start after the other ended.
    const [leftStart, leftEnd] = output('LEFT_TIMES').data as Float64Array;
    const [rightStart, rightEnd] = output('RIGHT_TIMES').data as Float64Array;
    expect(leftStart!).toBeLessThan(rightEnd!);
    expect(rightStart!).toBeLessThan(leftEnd!);
  });

  it('fails the request with the failing step named, and starts no step after it', async () => {
    const before = (await http.modelStatistics('last_fp32'))[0]!.inference_count;
    const ok = await http.infer({ model: 'failing', inputs: [{ name: 'X', datatype: 'FP32', shape: [1, 4], data: new Float32Array(4) }] });
    expect(ok.outputs[0]!.shape).toEqual([1, 4]);
    const failure = await http
      .infer({ model: 'failing', inputs: [{ name: 'X', datatype: 'FP32', shape: [1, 3], data: new Float32Array(3) }] })
      .then(
        () => undefined,
        (error: Error & { httpStatus?: number }) => error,
      );
    expect(failure?.message).toMatch(/^in ensemble 'failing', .*'INPUT0' for model 'four_fp32'/);
    expect(failure?.httpStatus).toBe(400);
    const after = (await http.modelStatistics('last_fp32'))[0]!.inference_count;
    expect(after - before).toBe(1);
    const [failing] = await http.modelStatistics('failing');
    expect(failing!.inference_stats.fail.count).toBe(1);
    expect(failing!.inference_stats.success.count).toBe(1);
  });

  it('batches the steps of concurrent ensemble requests at each step model', async () => {
    const [before] = await http.modelStatistics('simple');
    const requests = Array.from({ length: 16 }, (_, r) =>
      http.infer({
        model: 'chain',
        inputs: [
          { name: 'A', datatype: 'INT32', shape: [1, 16], data: ints(16, (i) => r + i) },
          { name: 'B', datatype: 'INT32', shape: [1, 16], data: ints(16, () => r) },
        ],
      }),
    );
    const results = await Promise.all(requests);
    results.forEach((result, r) =>
      expect(Array.from(result.outputs[0]!.data as Int32Array)).toEqual(Array.from(ints(16, (i) => 2 * (r + i)))),
    );
    const [after] = await http.modelStatistics('simple');
    const inferences = after!.inference_count - before!.inference_count;
    const executions = after!.execution_count - before!.execution_count;
    expect(inferences).toBe(32); // two steps per request
    expect(executions).toBeLessThan(16); // batches of several requests, not 32 runs
    const [chain] = await http.modelStatistics('chain');
    expect(chain!.inference_stats.success.count).toBeGreaterThanOrEqual(16);
  });

  it("a traced ensemble request's steps are traced too, each naming it as parent_id", async () => {
    const setting = await postJson(`${server.url}/v2/models/chain/trace/setting`, { trace_level: ['TIMESTAMPS'], trace_rate: '1' });
    expect(setting.status).toBe(200);
    await http.infer({
      model: 'chain',
      id: 'traced',
      inputs: [
        { name: 'A', datatype: 'INT32', shape: [1, 16], data: ints(16, (i) => i) },
        { name: 'B', datatype: 'INT32', shape: [1, 16], data: ints(16, () => 1) },
      ],
    });
    let traces: any[] = [];
    for (let i = 0; i < 100 && traces.length === 0; i++) {
      traces = await readFile(join(traceDir, 'trace.json.0'), 'utf8').then(JSON.parse, () => []);
      if (traces.length === 0) await new Promise((r) => setTimeout(r, 20));
    }
    const parent = traces.find((t) => t.model_name === 'chain');
    expect(parent).toMatchObject({ request_id: 'traced' });
    expect(parent.parent_id).toBeUndefined();
    const steps = traces.filter((t) => t.model_name === 'simple');
    expect(steps).toHaveLength(2);
    for (const step of steps) {
      expect(step.parent_id).toBe(parent.id);
      expect(step.timestamps.map((t: any) => t.name)).toContain('COMPUTE_START');
    }
  });
});
