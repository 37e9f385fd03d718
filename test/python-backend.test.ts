/**
 * Triton's Python backend on a real server: model.py files in Triton's form, one process per
 * instance. What initialize() gets, the differential of a numpy model against the same computation
 * in ONNX Runtime in-process (batched and not, through an ensemble, and through BLS), a decoupled
 * model, auto_complete_config, and every failure: an exception in execute, a TritonError for one
 * request, a process that dies under load (zero failures elsewhere), a stuck execute, a failing
 * initialize. Triton's own examples with their own clients: triton-python-examples.test.ts.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchwiseClientError, GrpcClient, HttpClient } from '@batchwise/client';
import { scaler, serializeModel } from '@batchwise/modelgen';
import { loadOrt } from '@batchwise/modelgen/test-support/ort.ts';
import { readMetric } from './support/metrics.ts';
import {
  AUTO_PY,
  BLS_PY,
  COUNTER_CONFIG,
  COUNTER_PY,
  ECHO_CONFIG,
  ECHO_PY,
  finalizeConfig,
  finalizePy,
  LATE_SENDER_CONFIG,
  LATE_SENDER_PY,
  PROBE_CONFIG,
  PROBE_PY,
  SCALE_PY,
  SEQUENCE_CONFIG,
  SEQUENCE_PY,
} from './support/python-models.ts';
import { makeRepository } from './support/repository.ts';
import { serveModels, startTestServer } from './support/server.ts';
import { waitFor } from './support/wait-for.ts';

const scaleConfig = (name: string, backend: string, maxBatchSize: number) => `
name: "${name}"
${backend}
max_batch_size: ${maxBatchSize}
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
${maxBatchSize > 0 ? 'dynamic_batching { max_queue_delay_microseconds: 20000 }' : ''}
`;

const ENSEMBLE = `
name: "py_then_onnx"
platform: "ensemble"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
ensemble_scheduling { step [
  { model_name: "py_scale" model_version: -1 input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "mid" } },
  { model_name: "onnx_scale" model_version: -1 input_map { key: "INPUT0" value: "mid" } output_map { key: "OUTPUT0" value: "OUTPUT0" } }
] }
`;

const BLS_CONFIG = `
name: "bls"
backend: "python"
max_batch_size: 0
input [ { name: "MODEL" data_type: TYPE_STRING dims: [ 1 ] }, { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1, -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1, -1 ] } ]
`;

let repo: Awaited<ReturnType<typeof makeRepository>>;
let server: Awaited<ReturnType<typeof startTestServer>>;
let http: HttpClient;
let grpc: GrpcClient;

beforeAll(async () => {
  repo = await makeRepository([
    { name: 'py_scale', config: scaleConfig('py_scale', 'backend: "python"', 8), files: { '1/model.py': SCALE_PY } },
    { name: 'py_scale_nobatch', config: scaleConfig('py_scale_nobatch', 'backend: "python"', 0), files: { '1/model.py': SCALE_PY } },
    { name: 'onnx_scale', config: scaleConfig('onnx_scale', 'platform: "onnxruntime_onnx"', 8), model: scaler(2.5) },
    { name: 'py_then_onnx', config: ENSEMBLE },
    { name: 'bls', config: BLS_CONFIG, files: { '1/model.py': BLS_PY } },
    { name: 'probe', config: PROBE_CONFIG, files: { '1/model.py': PROBE_PY } },
    { name: 'counter', config: COUNTER_CONFIG, files: { '1/model.py': COUNTER_PY } },
    { name: 'auto', config: 'backend: "python"', files: { '1/model.py': AUTO_PY } },
    { name: 'echo', config: ECHO_CONFIG, files: { '1/model.py': ECHO_PY } },
    { name: 'py_sequence', config: SEQUENCE_CONFIG, files: { '1/model.py': SEQUENCE_PY } },
    { name: 'late_sender', config: LATE_SENDER_CONFIG, files: { '1/model.py': LATE_SENDER_PY } },
    { name: 'finalize_raises', config: finalizeConfig('finalize_raises'), files: { '1/model.py': finalizePy('raise') } },
    { name: 'finalize_hangs', config: finalizeConfig('finalize_hangs'), files: { '1/model.py': finalizePy('hang') } },
  ]);
  server = await startTestServer([repo.dir], { modelControlMode: 'explicit', loadModels: ['*'] });
  http = new HttpClient({ url: server.url });
  grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
}, 120_000);

afterAll(async () => {
  await grpc?.close();
  await http?.close();
  await server?.close();
  await repo?.remove();
});

/** ONNX Runtime in-process on scaler(2.5): the source of truth for OUT = IN * 2.5. */
async function inProcessScale(rows: Float32Array, shape: number[], times = 1): Promise<Float32Array> {
  const ort = loadOrt();
  const session = await ort.InferenceSession.create(serializeModel(scaler(2.5)));
  try {
    let data = rows;
    for (let i = 0; i < times; i++) {
      const out = await session.run({ INPUT0: new ort.Tensor('float32', data, shape) });
      data = out['OUTPUT0']!.data as Float32Array;
    }
    return data;
  } finally {
    await session.release();
  }
}

function randomRows(rows: number, width: number, seed: number): Float32Array {
  let s = seed;
  return Float32Array.from({ length: rows * width }, () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return (s / 2 ** 31) * 200 - 100;
  });
}

describe('a numpy model equals the same computation in ONNX Runtime in-process', () => {
  it.each([
    ['py_scale', 1, true],
    ['py_scale_nobatch', 1, false],
    ['py_then_onnx', 2, true],
  ] as const)('%s: 12 concurrent requests of different rows and widths, bit for bit', async (model, times, batching) => {
    const requests = Array.from({ length: 12 }, (_, i) => {
      const rows = batching ? 1 + (i % 3) : 1;
      const width = 3 + (i % 4);
      const data = randomRows(rows, width, i + 1);
      const shape = batching ? [rows, width] : [width];
      return { data, shape };
    });
    const answers = await Promise.all(
      requests.map((r, i) =>
        (i % 2 ? http : grpc).infer({ model, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: r.shape, data: r.data }] }),
      ),
    );
    for (let i = 0; i < requests.length; i++) {
      const expected = await inProcessScale(requests[i]!.data, batching ? requests[i]!.shape : [1, ...requests[i]!.shape], times);
      expect(answers[i]!.outputs[0]!.shape).toEqual(requests[i]!.shape);
      expect(Buffer.from((answers[i]!.outputs[0]!.data as Float32Array).buffer).equals(Buffer.from(expected.buffer))).toBe(true);
    }
    if (batching) {
      const stats = await http.modelStatistics(model === 'py_then_onnx' ? 'py_scale' : model);
      expect(Number(stats[0]!.execution_count)).toBeLessThan(Number(stats[0]!.inference_count));
    }
  });

  it('through BLS: a Python model calling the ONNX model answers what ONNX Runtime in-process does; a call to an unknown model is its error', async () => {
    const data = randomRows(1, 5, 7);
    const answer = await http.infer({
      model: 'bls',
      inputs: [
        { name: 'MODEL', datatype: 'BYTES', shape: [1], data: ['onnx_scale'] },
        { name: 'INPUT0', datatype: 'FP32', shape: [1, 5], data },
      ],
    });
    const expected = await inProcessScale(data, [1, 5]);
    expect([...(answer.outputs[0]!.data as Float32Array)]).toEqual([...expected]);
    const failed = await http
      .infer({
        model: 'bls',
        inputs: [
          { name: 'MODEL', datatype: 'BYTES', shape: [1], data: ['nope'] },
          { name: 'INPUT0', datatype: 'FP32', shape: [1, 5], data },
        ],
      })
      .catch((e: BatchwiseClientError) => e);
    expect(failed).toBeInstanceOf(BatchwiseClientError);
    expect((failed as BatchwiseClientError).message).toMatch(/unknown model: 'nope'/);
  });
});

it("gives initialize() Triton's seven string args, runs each instance in its own process, and finalizes on unload", async () => {
  const modelDir = join(repo.dir, 'probe');
  const args = JSON.parse(await readFile(join(modelDir, 'init-pool_0.json'), 'utf8'));
  expect(Object.keys(args).sort()).toEqual(
    [
      'model_config',
      'model_instance_device_id',
      'model_instance_kind',
      'model_instance_name',
      'model_name',
      'model_repository',
      'model_version',
    ].sort(),
  );
  expect(Object.values(args).every((v) => typeof v === 'string')).toBe(true);
  expect(args).toMatchObject({
    model_instance_kind: 'CPU',
    model_instance_name: 'pool_0',
    model_instance_device_id: '0',
    model_repository: modelDir,
    model_version: '1',
    model_name: 'probe',
  });
  expect(JSON.parse(args.model_config)).toMatchObject({ name: 'probe', backend: 'python', max_batch_size: 8 });
  const answers = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      http.infer({ model: 'probe', inputs: [{ name: 'X', datatype: 'FP32', shape: [1, 1], data: [10 + i] }] }),
    ),
  );
  const who = new Set(answers.map((a) => Buffer.from((a.outputs.find((o) => o.name === 'WHO')!.data as Uint8Array[])[0]!).toString()));
  const pids = new Set([...who].map((w) => w.split('@')[1]));
  expect(pids.has(String(process.pid))).toBe(false);
  expect([...who].every((w) => /^pool_[01]@\d+$/.test(w))).toBe(true);
});

describe('failures are contained', () => {
  const probe = (x: number, rows = 1) =>
    http.infer({ model: 'probe', inputs: [{ name: 'X', datatype: 'FP32', shape: [rows, 1], data: new Array(rows).fill(x) }] });
  const errorOf = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: BatchwiseClientError) => e,
    );

  it('an exception in execute fails its batch (500, the Python message); a TritonError fails only its request, with its code', async () => {
    const raised = await errorOf(probe(1));
    expect(raised).toMatchObject({
      httpStatus: 500,
      message: expect.stringMatching(
        /^Failed to process the request\(s\) for model 'pool_[01]', message: TritonModelException: the model refused this batch/,
      ),
    });
    const refused = await errorOf(probe(2));
    expect(refused).toMatchObject({ httpStatus: 400, message: 'bad row' });
    expect((await probe(5)).outputs[0]!.data).toEqual(Float32Array.of(6));
  });

  it('a process that dies fails only its in-flight requests, is restarted and counted; other models lose nothing', async () => {
    const before = await readMetric(server.metricsPort, 'batchwise_model_process_deaths_total', 'probe');
    let stop = false;
    const others: Promise<number>[] = [];
    for (let c = 0; c < 4; c++) {
      others.push(
        (async () => {
          let failures = 0;
          while (!stop) {
            await http
              .infer({
                model: c % 2 ? 'py_scale' : 'onnx_scale',
                inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data: [1, 2] }],
              })
              .catch(() => failures++);
          }
          return failures;
        })(),
      );
    }
    const died = await errorOf(probe(3));
    expect(died).toMatchObject({ httpStatus: 500, message: expect.stringMatching(/Python process died \(exited with code 3\)/) });
    await waitFor(
      async () =>
        (await readMetric(server.metricsPort, 'batchwise_model_process_deaths_total', 'probe')) === (Number.isNaN(before) ? 0 : before) + 1,
    );
    // The restarted process serves again; the server stayed ready throughout.
    await waitFor(
      async () =>
        await probe(7).then(
          () => true,
          () => false,
        ),
    );
    expect(await http.isServerReady()).toBe(true);
    stop = true;
    expect(await Promise.all(others)).toEqual([0, 0, 0, 0]);
  });

  it("ignores SIGINT and SIGTERM, as Triton's stub does: a stop sent to the whole process group is the server's to act on", async () => {
    // Each instance's name and pid, from enough answers to have met both instances.
    const who = async () => {
      const seen = new Set<string>();
      for (let round = 0; round < 50 && seen.size < 2; round++) {
        const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => probe(10 + i)));
        for (const a of answers) seen.add(Buffer.from((a.outputs.find((o) => o.name === 'WHO')!.data as Uint8Array[])[0]!).toString());
      }
      return seen;
    };
    const before = await who();
    expect(before.size).toBe(2);
    const deaths = await readMetric(server.metricsPort, 'batchwise_model_process_deaths_total', 'probe');
    for (const pid of new Set([...before].map((w) => Number(w.split('@')[1])))) {
      process.kill(pid, 'SIGINT');
      process.kill(pid, 'SIGTERM');
    }
    // A death is noticed within milliseconds (the socket closes); give it far longer.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await who()).toEqual(before);
    expect(await readMetric(server.metricsPort, 'batchwise_model_process_deaths_total', 'probe')).toBe(deaths);
  });

  it('a stuck execute is ended by the execute timeout and its process replaced', async () => {
    const stuck = await errorOf(probe(4));
    expect(stuck).toMatchObject({ httpStatus: 500, message: expect.stringMatching(/did not finish within 3000 ms/) });
    await waitFor(
      async () =>
        await probe(8).then(
          () => true,
          () => false,
        ),
    );
  });
});

describe('requests as Triton passes them', () => {
  it('BYTES elements (empty and non-ASCII among them), the correlation id, flags and parameters, and response parameters', async () => {
    const texts = ['abc', '', 'héllo wörld', 'x'.repeat(5000)];
    const answer = await http.infer({
      model: 'echo',
      inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [4], data: texts }],
      parameters: { sequence_id: 42, sequence_start: true, custom: 'yes', n: 3 },
    });
    const out = (name: string) => (answer.outputs.find((o) => o.name === name)!.data as Uint8Array[]).map((b) => Buffer.from(b));
    expect(out('REVERSED').map((b) => b.toString('latin1'))).toEqual(texts.map((t) => Buffer.from(t).reverse().toString('latin1')));
    const meta = JSON.parse(out('META')[0]!.toString());
    expect(meta).toMatchObject({ correlation_id: 42, flags: 1, requested: ['META', 'REVERSED'] });
    expect(meta.parameters).toMatchObject({ custom: 'yes', n: 3 });
    // InferenceResponse(parameters=...) reaches the client, over HTTP and gRPC alike.
    expect(answer.parameters).toEqual({ reversed: true, count: 4, by: 'echo' });
    const overGrpc = await grpc.infer({ model: 'echo', inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [1], data: ['x'] }] });
    expect(overGrpc.parameters).toEqual({ reversed: true, count: 1, by: 'echo' });
  });

  it('BYTES that are not text (NUL, invalid UTF-8) reach the model as they are, as in Triton', async () => {
    const raw = [Uint8Array.of(0, 255, 65), Uint8Array.of(0xc3, 0x28)];
    const answer = await http.infer({ model: 'echo', inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [2], data: raw }] });
    const reversed = (answer.outputs.find((o) => o.name === 'REVERSED')!.data as Uint8Array[]).map((b) => [...b]);
    expect(reversed).toEqual([
      [65, 255, 0],
      [0x28, 0xc3],
    ]);
  });

  it('a segfault in a C extension fails its request, names the signal, and the process comes back', async () => {
    const crashed = await http.infer({ model: 'echo', inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [1], data: ['segfault'] }] }).then(
      () => undefined,
      (e: BatchwiseClientError) => e,
    );
    expect(crashed).toMatchObject({ httpStatus: 500, message: expect.stringMatching(/Python process died \(killed by SIGSEGV\)/) });
    await waitFor(async () =>
      http.infer({ model: 'echo', inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [1], data: ['ok'] }] }).then(
        () => true,
        () => false,
      ),
    );
  });
});

it('sequence batching: each request carries its correlation id and START/END flags, interleaved sequences kept apart', async () => {
  const step = (id: number, x: number, start: boolean, end: boolean) =>
    (id % 2 ? http : grpc).infer({
      model: 'py_sequence',
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [x] }],
      parameters: { sequence_id: id, sequence_start: start, sequence_end: end },
    });
  const values = (r: Awaited<ReturnType<typeof step>>, name: string) =>
    Array.from(r.outputs.find((o) => o.name === name)!.data as ArrayLike<number | bigint>, Number);
  const answers = [];
  for (let i = 0; i < 3; i++) {
    const [a, b] = await Promise.all([step(1001, 1 + i, i === 0, i === 2), step(2002, 10 * (i + 1), i === 0, i === 2)]);
    answers.push([
      values(a, 'SUM')[0],
      values(a, 'FLAGS')[0],
      values(a, 'CID')[0],
      values(b, 'SUM')[0],
      values(b, 'FLAGS')[0],
      values(b, 'CID')[0],
    ]);
  }
  expect(answers).toEqual([
    [1, 1, 1001, 10, 1, 2002],
    [3, 0, 1001, 30, 0, 2002],
    [6, 2, 1001, 60, 2, 2002],
  ]);
});

describe('shared-memory regions grow by the growth step (--backend-config)', () => {
  let small: Awaited<ReturnType<typeof startTestServer>>;
  let client: HttpClient;
  beforeAll(async () => {
    small = await startTestServer([repo.dir], {
      modelControlMode: 'explicit',
      loadModels: ['py_scale_nobatch'],
      backendConfig: ['python,shm-default-byte-size=65536', 'python,shm-growth-byte-size=65536'],
    });
    client = new HttpClient({ url: small.url });
  });
  afterAll(async () => {
    await client?.close();
    await small?.close();
  });

  it('8 MB in and out, then small again, each equal to ONNX Runtime in-process', async () => {
    for (const width of [2_000_000, 300_000, 7]) {
      const data = randomRows(1, width, width);
      const answer = await client.infer({
        model: 'py_scale_nobatch',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [width], data }],
      });
      const expected = await inProcessScale(data, [1, width]);
      expect(Buffer.from((answer.outputs[0]!.data as Float32Array).buffer).equals(Buffer.from(expected.buffer))).toBe(true);
    }
  });
});

it("a model that is not decoupled may answer through its sender after execute() returned None (Triton's default-mode sender)", async () => {
  const answers = await Promise.all(
    [1, 2, 3, 4].map((x) => http.infer({ model: 'late_sender', inputs: [{ name: 'X', datatype: 'FP32', shape: [1, 1], data: [x] }] })),
  );
  expect(answers.map((a) => Array.from(a.outputs[0]!.data as Float32Array))).toEqual([[2], [4], [6], [8]]);
});

it('a decoupled model sends its responses from a thread, then the final flag', async () => {
  const results = [];
  for await (const r of grpc.streamResponses({ model: 'counter', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [4] }] })) {
    results.push(...(r.outputs[0]!.data as Int32Array));
  }
  expect(results).toEqual([0, 1, 2, 3]);
});

it('auto_complete_config completes a config that declares no tensors', async () => {
  const config = await http.modelConfig('auto');
  expect(config).toMatchObject({ max_batch_size: 4, input: [{ name: 'A', data_type: 'TYPE_INT32' }], output: [{ name: 'B' }] });
  expect(config['dynamic_batching']).toBeDefined();
  const answer = await http.infer({ model: 'auto', inputs: [{ name: 'A', datatype: 'INT32', shape: [1, 2], data: [3, 4] }] });
  expect([...(answer.outputs[0]!.data as Int32Array)]).toEqual([6, 8]);
});

describe('load failures name the Python error', () => {
  it.each([
    [
      'initialize raises',
      'class TritonPythonModel:\n    def initialize(self, args):\n        raise ValueError("no weights here")\n    def execute(self, r):\n        return []\n',
      /ValueError: no weights here/,
    ],
    ['no TritonPythonModel', 'x = 1\n', /TritonPythonModel/],
    ['a syntax error', 'def broken(:\n', /SyntaxError/],
    ['an import that fails', 'import no_such_module_here\n', /No module named 'no_such_module_here'/],
  ])('%s', async (_, code, message) => {
    const bad = await serveModels(
      [
        {
          name: 'bad',
          config:
            'backend: "python"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\noutput [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]',
          files: { '1/model.py': code },
        },
      ],
      {
        modelControlMode: 'explicit',
      },
    );
    try {
      const error = await bad.client.loadModel('bad').then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error?.message).toMatch(message);
      expect(await bad.client.isServerLive()).toBe(true);
    } finally {
      await bad.close();
    }
  });
});

it.each(['finalize_raises', 'finalize_hangs'])('%s: a finalize() that raises or hangs does not hold up the unload', async (model) => {
  const started = Date.now();
  await http.unloadModel(model);
  await waitFor(async () => !(await http.isModelReady(model)));
  // The close grace of a process is the execute timeout (1000 ms here): a hanging finalize is killed then.
  expect(Date.now() - started).toBeLessThan(5_000);
  expect(await http.isServerLive()).toBe(true);
});

it('unloading runs finalize() in each instance', async () => {
  const dir = join(repo.dir, 'probe');
  await http.unloadModel('probe');
  await waitFor(async () => existsSync(join(dir, 'finalized-pool_0')) && existsSync(join(dir, 'finalized-pool_1')));
});
