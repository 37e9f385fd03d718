/**
 * Triton's python_backend examples, unchanged (test/fixtures/triton-python-backend, see its README),
 * served by a real Batchwise server with `backend: "python"`: add_sub, auto_complete, bls (sync and
 * async), bls_decoupled (sync and async) and decoupled (square_int32, repeat_int32).
 *
 * Each example gets the model repository its README builds (the same copies: `models/<name>/1/model.py`,
 * `models/<name>/config.pbtxt`), in a temporary folder, and its own server. Then:
 *
 * - the example's own client script, unchanged, with Triton's Python client (tritonclient, built by
 *   ../shared/tools/setup-triton-client.sh; TRITON_CLIENT_DIR, default ~/.cache/tritonclient): it must
 *   exit 0 and print its PASS line. The scripts hardcode Triton's default addresses (localhost:8000 for
 *   HTTP, localhost:8001 for gRPC). Binding those ports would make this file collide with any other
 *   server on the machine and with the other test files running beside it, so the scripts run under
 *   test/support/triton/run_qa.py instead (over run_unchanged.py): it rewrites only those two URLs, in
 *   the constructors of tritonclient's InferenceServerClient, and custom_metrics' metrics URL
 *   (localhost:8002, through `requests`), to the test server's ephemeral ports, and runs the script as
 *   `python3 script.py` would. Skipped, with a warning, where tritonclient is not built.
 * - everywhere (no tritonclient needed): the same models called with @batchwise/client over HTTP and
 *   gRPC, their answers checked against the numpy computation of each model.py redone here.
 *
 * The bls examples call a model named "pytorch" (python_backend's examples/pytorch), which imports
 * torch; test/fixtures/python-models/pytorch_numpy is a numpy stand-in that computes the same.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, HttpClient, type InferResult, type InferenceClient } from '@batchwise/client';
import { startTestServer } from './support/server.ts';

const CLIENT_DIR = process.env['TRITON_CLIENT_DIR'] ?? join(homedir(), '.cache', 'tritonclient');
const PYTHON_PATH = join(CLIENT_DIR, 'py');
const tritonclient = existsSync(join(PYTHON_PATH, 'tritonclient', 'http')) && existsSync(join(PYTHON_PATH, 'tritonclient', 'grpc'));
if (!tritonclient)
  console.warn(
    `SKIPPED (Triton's Python client missing at ${PYTHON_PATH}): the python_backend examples' own client scripts; ` +
      'build it with ../shared/tools/setup-triton-client.sh',
  );

/** The vendored upstream tree (paths as in python_backend: examples/<name>/...). */
const UPSTREAM = new URL('./fixtures/triton-python-backend/', import.meta.url).pathname;
const PYTORCH_STAND_IN = new URL('./fixtures/python-models/pytorch_numpy/', import.meta.url).pathname;
/** run_unchanged.py's rewrite of the client constructors' addresses, and of `requests` URLs to :8002 (metrics) too. */
const RUN_QA = new URL('./support/triton/run_qa.py', import.meta.url).pathname;

/** One model of a README's "Create the model repository" step: its model.py and config.pbtxt (none: auto-completed). */
interface ModelCopy {
  readonly name: string;
  readonly model: string;
  readonly config?: string;
}

const upstream = (path: string) => join(UPSTREAM, path);
const ADD_SUB: ModelCopy = {
  name: 'add_sub',
  model: upstream('examples/add_sub/model.py'),
  config: upstream('examples/add_sub/config.pbtxt'),
};
const PYTORCH: ModelCopy = { name: 'pytorch', model: join(PYTORCH_STAND_IN, 'model.py'), config: join(PYTORCH_STAND_IN, 'config.pbtxt') };
const SQUARE: ModelCopy = {
  name: 'square_int32',
  model: upstream('examples/decoupled/square_model.py'),
  config: upstream('examples/decoupled/square_config.pbtxt'),
};
const REPEAT: ModelCopy = {
  name: 'repeat_int32',
  model: upstream('examples/decoupled/repeat_model.py'),
  config: upstream('examples/decoupled/repeat_config.pbtxt'),
};
const example = (dir: string, name: string, prefix: string): ModelCopy => ({
  name,
  model: upstream(`examples/${dir}/${prefix}_model.py`),
  config: upstream(`examples/${dir}/${prefix}_config.pbtxt`),
});

/** A client script of an example, and the line it prints when every one of its checks passed. */
interface ClientScript {
  readonly script: string;
  readonly protocol: 'HTTP' | 'gRPC';
  readonly pass: string;
}

interface Served {
  readonly http: HttpClient;
  readonly grpc: GrpcClient;
  readonly httpAddress: string;
  readonly grpcAddress: string;
  readonly metricsAddress: string;
  close(): Promise<void>;
}

/** The README's repository in a temporary folder (copies, as its `cp` lines make), served by a test server. */
async function serveExample(models: readonly ModelCopy[]): Promise<Served> {
  const dir = await mkdtemp(join(tmpdir(), 'batchwise-python-examples-'));
  for (const m of models) {
    await mkdir(join(dir, m.name, '1'), { recursive: true });
    await copyFile(m.model, join(dir, m.name, '1', 'model.py'));
    if (m.config) await copyFile(m.config, join(dir, m.name, 'config.pbtxt'));
  }
  let server: Awaited<ReturnType<typeof startTestServer>>;
  try {
    server = await startTestServer([dir]);
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  const http = new HttpClient({ url: server.url });
  const grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
  return {
    http,
    grpc,
    httpAddress: `127.0.0.1:${server.httpPort}`,
    grpcAddress: `127.0.0.1:${server.grpcPort}`,
    metricsAddress: `127.0.0.1:${server.metricsPort}`,
    close: async () => {
      await grpc.close();
      await http.close();
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Runs an example's client script, unchanged, against `served` (see the file comment for the address rewrite). */
function runClient(served: Served, script: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      '/usr/bin/python3',
      [RUN_QA, served.httpAddress, served.grpcAddress, served.metricsAddress, upstream(script)],
      { env: { ...process.env, PYTHONPATH: PYTHON_PATH }, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** The client scripts of one example, each run unchanged; skipped without tritonclient. */
function describeClientScripts(served: () => Served, scripts: readonly ClientScript[]): void {
  describe.skipIf(!tritonclient)("the example's own client script (tritonclient, unchanged)", () => {
    it.each(scripts.map((s) => [s.script, s.protocol, s.pass] as const))('%s (%s) exits 0 and prints "%s"', async (script, _, pass) => {
      const run = await runClient(served(), script);
      const transcript = `exit ${run.code}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;
      expect(run.code, transcript).toBe(0);
      expect(run.stdout.split('\n'), transcript).toContain(pass);
    });
  });
}

const output = (result: InferResult, name: string) => {
  const found = result.outputs.find((o) => o.name === name);
  if (!found) throw new Error(`no output ${name} in ${JSON.stringify(result.outputs.map((o) => o.name))}`);
  return found;
};
const floats = (result: InferResult, name: string) => Array.from(output(result, name).data as Float32Array);
const ints = (result: InferResult, name: string) => Array.from(output(result, name).data as ArrayLike<number | bigint>, Number);

/** Four random FP32 values, as np.random.rand(4).astype(np.float32). */
const rand4 = () => Float32Array.from({ length: 4 }, () => Math.random());
/** numpy's float32 `a + b` and `a - b`: the exact sum or difference rounded once to float32. */
const add = (a: Float32Array, b: Float32Array) => Array.from(Float32Array.from(a, (x, i) => x + b[i]!));
const sub = (a: Float32Array, b: Float32Array) => Array.from(Float32Array.from(a, (x, i) => x - b[i]!));

const clients = (served: () => Served): [string, () => InferenceClient][] => [
  ['HTTP', () => served().http],
  ['gRPC', () => served().grpc],
];

describe('custom_metrics (pb_utils.MetricFamily on the metrics endpoint)', () => {
  let served: Served;
  beforeAll(async () => {
    served = await serveExample([
      {
        name: 'custom_metrics',
        model: upstream('examples/custom_metrics/model.py'),
        config: upstream('examples/custom_metrics/config.pbtxt'),
      },
    ]);
  });
  afterAll(async () => {
    await served?.close();
  });

  describeClientScripts(() => served, [{ script: 'examples/custom_metrics/client.py', protocol: 'HTTP', pass: 'PASS: custom_metrics' }]);

  it('the counter the model increments with its execution time is exported with its help, type and labels', async () => {
    const a = rand4();
    const b = rand4();
    const result = await served.http.infer({
      model: 'custom_metrics',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [4], data: a },
        { name: 'INPUT1', datatype: 'FP32', shape: [4], data: b },
      ],
    });
    expect(floats(result, 'OUTPUT0')).toEqual(add(a, b));
    const text = await (await fetch(`http://${served.metricsAddress}/metrics`)).text();
    expect(text).toContain('# HELP requests_process_latency_ns Cumulative time spent processing requests');
    expect(text).toContain('# TYPE requests_process_latency_ns counter');
    const sample = /^requests_process_latency_ns\{model="custom_metrics",version="1"\} (\d+)$/m.exec(text);
    expect(Number(sample?.[1])).toBeGreaterThan(0);
  });
});

describe('add_sub (python_backend README: models/add_sub)', () => {
  let served: Served;
  beforeAll(async () => {
    served = await serveExample([ADD_SUB]);
  });
  afterAll(async () => {
    await served?.close();
  });

  describeClientScripts(() => served, [{ script: 'examples/add_sub/client.py', protocol: 'HTTP', pass: 'PASS: add_sub' }]);

  it.each(clients(() => served))('%s: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (FP32 [4])', async (_, client) => {
    const [a, b] = [rand4(), rand4()];
    const result = await client().infer({
      model: 'add_sub',
      id: '1',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [4], data: a },
        { name: 'INPUT1', datatype: 'FP32', shape: [4], data: b },
      ],
      outputs: ['OUTPUT0', 'OUTPUT1'],
    });
    expect(result.modelName).toBe('add_sub');
    expect(output(result, 'OUTPUT0')).toMatchObject({ datatype: 'FP32', shape: [4] });
    expect(output(result, 'OUTPUT1')).toMatchObject({ datatype: 'FP32', shape: [4] });
    expect(floats(result, 'OUTPUT0')).toEqual(add(a, b));
    expect(floats(result, 'OUTPUT1')).toEqual(sub(a, b));
  });
  it('HTTP JSON tensors (no binary extension): the same sum and difference', async () => {
    const [a, b] = [rand4(), rand4()];
    const result = await served.http.infer({
      model: 'add_sub',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [4], data: a },
        { name: 'INPUT1', datatype: 'FP32', shape: [4], data: b },
      ],
      binary: false,
    });
    expect(floats(result, 'OUTPUT0')).toEqual(add(a, b));
    expect(floats(result, 'OUTPUT1')).toEqual(sub(a, b));
  });
});

describe('auto_complete (models without config.pbtxt: nobatch_auto_complete, batch_auto_complete)', () => {
  let served: Served;
  beforeAll(async () => {
    served = await serveExample([
      { name: 'nobatch_auto_complete', model: upstream('examples/auto_complete/nobatch_model.py') },
      { name: 'batch_auto_complete', model: upstream('examples/auto_complete/batch_model.py') },
    ]);
  });
  afterAll(async () => {
    await served?.close();
  });

  describeClientScripts(() => served, [{ script: 'examples/auto_complete/client.py', protocol: 'HTTP', pass: 'PASS: auto_complete' }]);

  const tensors = [
    { name: 'INPUT0', data_type: 'TYPE_FP32', dims: [4] },
    { name: 'INPUT1', data_type: 'TYPE_FP32', dims: [4] },
  ];
  const outputs = [
    { name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [4] },
    { name: 'OUTPUT1', data_type: 'TYPE_FP32', dims: [4] },
  ];

  it.each(clients(() => served))(
    '%s: the config is what auto_complete_config made (max_batch_size, inputs, outputs, batching)',
    async (_, client) => {
      const nobatch = (await client().modelConfig('nobatch_auto_complete')) as any;
      expect(nobatch).toMatchObject({ name: 'nobatch_auto_complete', backend: 'python', max_batch_size: 0 });
      expect(nobatch.input).toMatchObject(tensors);
      expect(nobatch.output).toMatchObject(outputs);
      const batch = (await client().modelConfig('batch_auto_complete')) as any;
      expect(batch).toMatchObject({ name: 'batch_auto_complete', backend: 'python', max_batch_size: 4 });
      expect(batch.input).toMatchObject(tensors);
      expect(batch.output).toMatchObject(outputs);
      // set_dynamic_batching() in batch_model.py.
      expect(batch.dynamic_batching).toBeDefined();
    },
  );

  it.each(clients(() => served))('%s: both models add and subtract, the batching one a batch of 3', async (_, client) => {
    const [a, b] = [rand4(), rand4()];
    const one = await client().infer({
      model: 'nobatch_auto_complete',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [4], data: a },
        { name: 'INPUT1', datatype: 'FP32', shape: [4], data: b },
      ],
    });
    expect(floats(one, 'OUTPUT0')).toEqual(add(a, b));
    expect(floats(one, 'OUTPUT1')).toEqual(sub(a, b));
    const [c, d] = [Float32Array.of(...rand4(), ...rand4(), ...rand4()), Float32Array.of(...rand4(), ...rand4(), ...rand4())];
    const three = await client().infer({
      model: 'batch_auto_complete',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [3, 4], data: c },
        { name: 'INPUT1', datatype: 'FP32', shape: [3, 4], data: d },
      ],
    });
    expect(output(three, 'OUTPUT0').shape).toEqual([3, 4]);
    expect(floats(three, 'OUTPUT0')).toEqual(add(c, d));
    expect(floats(three, 'OUTPUT1')).toEqual(sub(c, d));
  });
});

describe('bls sync (bls_sync calling add_sub and pytorch)', () => {
  let served: Served;
  beforeAll(async () => {
    served = await serveExample([ADD_SUB, example('bls', 'bls_sync', 'sync'), PYTORCH]);
  });
  afterAll(async () => {
    await served?.close();
  });

  describe.skipIf(!tritonclient)("the example's own client script (tritonclient, unchanged)", () => {
    it('examples/bls/sync_client.py (HTTP) exits 0, prints "PASS: BLS Sync", and the undefined model\'s error names it', async () => {
      const run = await runClient(served, 'examples/bls/sync_client.py');
      const transcript = `exit ${run.code}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;
      expect(run.code, transcript).toBe(0);
      expect(run.stdout.split('\n'), transcript).toContain('PASS: BLS Sync');
      // The script's third request names a model that does not exist; it prints the server's error message.
      const undefinedPart = run.stdout.slice(run.stdout.indexOf("=========='undefined' model result=========="));
      expect(undefinedPart, transcript).toMatch(/undefined_model/);
    });
  });

  const request = (model: string, a: Float32Array, b: Float32Array) => ({
    model: 'bls_sync',
    inputs: [
      { name: 'INPUT0', datatype: 'FP32' as const, shape: [4], data: a },
      { name: 'INPUT1', datatype: 'FP32' as const, shape: [4], data: b },
      { name: 'MODEL_NAME', datatype: 'BYTES' as const, shape: [1], data: [model] },
    ],
    outputs: ['OUTPUT0', 'OUTPUT1'],
  });

  it.each(clients(() => served))('%s: MODEL_NAME add_sub and pytorch answer the sum and difference', async (_, client) => {
    for (const model of ['add_sub', 'pytorch']) {
      const [a, b] = [rand4(), rand4()];
      const result = await client().infer(request(model, a, b));
      expect(floats(result, 'OUTPUT0'), model).toEqual(add(a, b));
      expect(floats(result, 'OUTPUT1'), model).toEqual(sub(a, b));
    }
  });

  it.each(clients(() => served))('%s: MODEL_NAME undefined_model fails with an error that names it', async (_, client) => {
    const error = await client()
      .infer(request('undefined_model', rand4(), rand4()))
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(error).toBeInstanceOf(Error);
    expect(error!.message).toMatch(/undefined_model/);
    // The server stays up for the next request.
    const [a, b] = [rand4(), rand4()];
    expect(floats(await client().infer(request('add_sub', a, b)), 'OUTPUT0')).toEqual(add(a, b));
  });
});

describe('bls async (bls_async: OUTPUT0 from pytorch, OUTPUT1 from add_sub, two async_exec() at once)', () => {
  let served: Served;
  beforeAll(async () => {
    served = await serveExample([ADD_SUB, example('bls', 'bls_async', 'async'), PYTORCH]);
  });
  afterAll(async () => {
    await served?.close();
  });

  describeClientScripts(() => served, [{ script: 'examples/bls/async_client.py', protocol: 'HTTP', pass: 'PASS: BLS Async' }]);

  it.each(clients(() => served))('%s: the sum and the difference', async (_, client) => {
    const [a, b] = [rand4(), rand4()];
    const result = await client().infer({
      model: 'bls_async',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [4], data: a },
        { name: 'INPUT1', datatype: 'FP32', shape: [4], data: b },
      ],
      outputs: ['OUTPUT0', 'OUTPUT1'],
    });
    expect(floats(result, 'OUTPUT0')).toEqual(add(a, b));
    expect(floats(result, 'OUTPUT1')).toEqual(sub(a, b));
  });
});

/**
 * The bls_decoupled models answer SUM = the sum of square_int32's responses (n responses of n: n²;
 * the async one makes two such calls: 2n²). Their model.py builds SUM from `np.array([0])`, which is
 * int64 on Linux, although the config says TYPE_INT32: Triton does not check a Python model's output
 * datatype against the config and sends what the model made, so the datatype is not asserted here.
 */
describe.each([
  ['sync', 'bls_decoupled_sync', 'PASS: BLS Decoupled Sync', 1],
  ['async', 'bls_decoupled_async', 'PASS: BLS Decoupled Async', 2],
] as const)('bls_decoupled %s (%s calling the decoupled square_int32)', (dir, model, pass, factor) => {
  let served: Served;
  beforeAll(async () => {
    served = await serveExample([example('bls_decoupled', model, dir), SQUARE]);
  });
  afterAll(async () => {
    await served?.close();
  });

  describeClientScripts(() => served, [{ script: `examples/bls_decoupled/${dir}_client.py`, protocol: 'HTTP', pass }]);

  it.each(clients(() => served))(`%s: SUM of IN = 4, 2, 0, 1 is ${factor === 1 ? 'IN²' : '2·IN²'}`, async (_, client) => {
    for (const n of [4, 2, 0, 1]) {
      const result = await client().infer({
        model,
        id: '1',
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(n) }],
        outputs: ['SUM'],
      });
      expect(output(result, 'SUM').shape, `IN ${n}`).toEqual([1]);
      expect(['INT32', 'INT64'], `IN ${n}`).toContain(output(result, 'SUM').datatype);
      expect(ints(result, 'SUM'), `IN ${n}`).toEqual([factor * n * n]);
    }
  });
});

describe('decoupled (square_int32 and repeat_int32, gRPC streaming)', () => {
  let served: Served;
  beforeAll(async () => {
    served = await serveExample([REPEAT, SQUARE]);
  });
  afterAll(async () => {
    await served?.close();
  });

  describeClientScripts(
    () => served,
    [
      { script: 'examples/decoupled/square_client.py', protocol: 'gRPC', pass: 'PASS: square_int32' },
      { script: 'examples/decoupled/repeat_client.py', protocol: 'gRPC', pass: 'PASS: repeat_int32' },
    ],
  );

  it('gRPC: square_int32, four requests on one stream, n responses of OUT = [n] to each (none to IN 0)', async () => {
    const stream = served.grpc.streamInfer();
    const values = [4, 2, 0, 1];
    values.forEach((n, i) =>
      stream.write({
        model: 'square_int32',
        id: String(i),
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(n) }],
      }),
    );
    stream.end();
    const got: Record<string, number[][]> = {};
    for await (const answer of stream) {
      if (!answer.ok) throw answer.error;
      if (answer.result.outputs.length === 0) continue;
      (got[answer.result.id!] ??= []).push(ints(answer.result, 'OUT'));
    }
    expect(got).toEqual({ '0': [[4], [4], [4], [4]], '1': [[2], [2]], '3': [[1]] });
  });

  it('gRPC: repeat_int32, IN [4, 2, 0, 1] with DELAY [1, 2, 3, 4] ms and WAIT 5 ms: OUT IN[i] and IDX i, in order', async () => {
    const got: [number[], number[]][] = [];
    for await (const result of served.grpc.streamResponses({
      model: 'repeat_int32',
      id: '0',
      inputs: [
        { name: 'IN', datatype: 'INT32', shape: [4], data: Int32Array.of(4, 2, 0, 1) },
        { name: 'DELAY', datatype: 'UINT32', shape: [4], data: Uint32Array.of(1, 2, 3, 4) },
        { name: 'WAIT', datatype: 'UINT32', shape: [1], data: Uint32Array.of(5) },
      ],
      outputs: ['OUT', 'IDX'],
    }))
      got.push([ints(result, 'OUT'), ints(result, 'IDX')]);
    expect(got).toEqual([
      [[4], [0]],
      [[2], [1]],
      [[0], [2]],
      [[1], [3]],
    ]);
  });

  it('HTTP generate_stream: square_int32 IN 3 streams OUT 3 three times, IN 0 nothing', async () => {
    const got: unknown[] = [];
    for await (const r of served.http.generateStream('square_int32', { IN: 3 }, { signal: AbortSignal.timeout(15_000) }))
      got.push(r['OUT']);
    expect(got).toEqual([3, 3, 3]);
    const none: unknown[] = [];
    for await (const r of served.http.generateStream('square_int32', { IN: 0 }, { signal: AbortSignal.timeout(15_000) })) none.push(r);
    expect(none).toEqual([]);
  });

  it('HTTP generate_stream: repeat_int32 streams OUT and IDX in order', async () => {
    const got: unknown[] = [];
    for await (const r of served.http.generateStream(
      'repeat_int32',
      { IN: [4, 2, 0, 1], DELAY: [1, 2, 3, 4], WAIT: 5 },
      { signal: AbortSignal.timeout(15_000) },
    ))
      got.push([r['OUT'], r['IDX']]);
    expect(got).toEqual([
      [4, 0],
      [2, 1],
      [0, 2],
      [1, 3],
    ]);
  });
});
