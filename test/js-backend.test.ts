/**
 * The JavaScript backend (`backend: "js"`) on a real server: model code in worker threads,
 * written into a temporary repository by the test. Batch semantics, per-request errors, user
 * exceptions and crashes, the execute timeout, load failures, calls to other models (BLS) and
 * npm packages from the model's own folder, over HTTP and gRPC.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchwiseClientError, GrpcClient, HttpClient } from '@batchwise/client';
import { serializeModel, simpleAddSub } from '@batchwise/modelgen';
import { loadOrt } from '@batchwise/modelgen/test-support/ort.ts';
import { makeRepository } from './support/repository.ts';
import { startTestServer } from './support/server.ts';

/** Doubles X; N tells each request how many requests its execute() call held; a negative X is that request's INVALID_ARG. */
const BATCHER = `
import { ModelError, tensor } from '@batchwise/backend';
export default class Batcher {
  initialize(args) {
    this.args = args;
  }
  execute(requests) {
    return requests.map((r) => {
      const x = r.inputs.X;
      if (x.data[0] < 0) return new ModelError('negative input in request ' + r.id, 'INVALID_ARG');
      const y = x.data.map((v) => v * 2);
      const rows = x.shape[0];
      const all = [tensor('Y', 'FP32', x.shape, y), tensor('N', 'INT32', [rows, 1], new Array(rows).fill(requests.length))];
      return { outputs: all.filter((t) => r.requestedOutputs.includes(t.name)) };
    });
  }
}
`;
const BATCHER_CONFIG = `name: "batcher"
backend: "js"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "N" data_type: TYPE_INT32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 300000 }
model_warmup [ { name: "zeros" batch_size: 2 inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } } ]
`;

/**
 * The batcher whose batch goes only when full: it waits up to 30 s for 8 rows, with the adaptive
 * delay off, so requests sent together meet in one execute call however late a loaded machine
 * delivers them (a test sends exactly 8 rows; one that sends fewer waits the delay out).
 */
const FULL_BATCHER_CONFIG = `name: "full_batcher"
backend: "js"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "N" data_type: TYPE_INT32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 30000000 }
parameters { key: "batchwise_adaptive_queue_delay" value: { string_value: "false" } }
`;

/** Misbehaves as the request's `mode` parameter says. */
const FAULTY = `
import { tensor } from '@batchwise/backend';
export default {
  async execute(requests) {
    const mode = requests[0].parameters.mode;
    if (mode === 'throw') throw new Error('user code threw');
    if (mode === 'reject') return Promise.reject(new Error('user promise rejected'));
    if (mode === 'exit') process.exit(1);
    if (mode === 'spin') for (;;) {}
    if (mode === 'oom') {
      const hog = [];
      for (;;) hog.push(new Array(1 << 16).fill(Math.random()));
    }
    if (mode === 'wrong-type') return requests.map(() => ({ outputs: [tensor('Y', 'FP64', [1], [1])] }));
    if (mode === 'wrong-shape') return requests.map(() => ({ outputs: [tensor('Y', 'FP32', [2], [1, 2])] }));
    return requests.map((r) => ({ outputs: [tensor('Y', 'FP32', [1], [r.inputs.X.data[0] + 1])] }));
  },
};
`;
const FAULTY_CONFIG = `name: "faulty"
backend: "js"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
parameters { key: "batchwise_execute_timeout_ms" value: { string_value: "1500" } }
`;

/** Calls the ONNX model 'simple' (A+B, A-B), or a model that is not there, as the `mode` parameter says. */
const CALLER = `
import { inferModel, ModelCallError, ModelError, tensor } from '@batchwise/backend';
export default class {
  async execute(requests) {
    return Promise.all(requests.map(async (r) => {
      const a = r.inputs.A, b = r.inputs.B;
      const mode = r.parameters.mode;
      try {
        const result = await inferModel({
          model: mode === 'unknown' ? 'no_such_model' : 'simple',
          inputs: mode === 'bad-shape' ? [tensor('INPUT0', 'INT32', [16], a.data.subarray(0, 16))] : [tensor('INPUT0', 'INT32', a.shape, a.data), tensor('INPUT1', 'INT32', b.shape, b.data)],
          outputs: ['OUTPUT0', 'OUTPUT1'],
        });
        const sum = result.output('OUTPUT0'), diff = result.output('OUTPUT1');
        return { outputs: [tensor('SUM', 'INT32', sum.shape, sum.data), tensor('DIFF', 'INT32', diff.shape, diff.data),
          tensor('CALLED', 'BYTES', [a.shape[0], 1], new Array(a.shape[0]).fill(result.model + '/' + result.version))] };
      } catch (error) {
        if (mode === 'unknown' && error instanceof ModelCallError) {
          return new ModelError('caught ' + error.code + ' from ' + error.model + ': ' + error.message, 'NOT_FOUND');
        }
        return error;
      }
    }));
  }
}
`;
const CALLER_CONFIG = `name: "caller"
backend: "js"
max_batch_size: 8
input [ { name: "A" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "B" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "SUM" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "DIFF" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "CALLED" data_type: TYPE_STRING dims: [ 1 ] } ]
`;
const SIMPLE_CONFIG = `name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
`;

/** Uses an npm package from its own node_modules: BYTES in, BYTES out. */
const PADDER = `
import { tensor } from '@batchwise/backend';
import pad from 'tiny-pad';
export default {
  execute(requests) {
    return requests.map((r) => ({ outputs: [tensor('PADDED', 'BYTES', r.inputs.TEXT.shape, r.inputs.TEXT.data.map((b) => pad(b.toString('utf8'), 6)))] }));
  },
};
`;
const PADDER_CONFIG = `name: "padder"
backend: "js"
max_batch_size: 0
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "PADDED" data_type: TYPE_STRING dims: [ -1 ] } ]
`;

const IO = `input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]`;

interface JsModelFiles {
  readonly name: string;
  readonly config: string;
  /** Files of version 1, by path. */
  readonly files: Readonly<Record<string, string>>;
}

/** Doubles X of any length; a negative first element is that request's INVALID_ARG. */
const DOUBLER = `
import { ModelError, tensor } from '@batchwise/backend';
export default {
  execute(requests) {
    return requests.map((r) => {
      const x = r.inputs.X;
      if (x.data[0] < 0) return new ModelError('negative input', 'INVALID_ARG');
      return { outputs: [tensor('Y', 'FP32', x.shape, x.data.map((v) => v * 2))] };
    });
  },
};
`;
const DOUBLER_CONFIG = `name: "doubler"
backend: "js"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
`;

const JS_MODELS: JsModelFiles[] = [
  { name: 'doubler', config: DOUBLER_CONFIG, files: { 'model.mjs': DOUBLER } },
  { name: 'batcher', config: BATCHER_CONFIG, files: { 'model.mjs': BATCHER } },
  { name: 'full_batcher', config: FULL_BATCHER_CONFIG, files: { 'model.mjs': BATCHER } },
  { name: 'faulty', config: FAULTY_CONFIG, files: { 'model.mjs': FAULTY } },
  { name: 'caller', config: CALLER_CONFIG, files: { 'model.mjs': CALLER } },
  {
    name: 'padder',
    config: PADDER_CONFIG,
    files: {
      'model.js': PADDER.replace('import pad', 'import pad'),
      'package.json': '{ "type": "module" }',
      'node_modules/tiny-pad/package.json': '{ "name": "tiny-pad", "version": "1.0.0", "type": "module", "exports": "./index.js" }',
      'node_modules/tiny-pad/index.js': "export default function pad(text, width) { return text.padStart(width, '*'); }\n",
    },
  },
  {
    name: 'bad_init',
    config: `name: "bad_init"\nbackend: "js"\nmax_batch_size: 0\n${IO}`,
    files: { 'model.mjs': "export default { initialize() { throw new Error('vocabulary missing'); }, execute() { return []; } };" },
  },
  {
    name: 'snake',
    config: `name: "snake"\nbackend: "python"\nmax_batch_size: 0\n${IO}`,
    files: { 'model.py': 'class TritonPythonModel: pass' },
  },
  {
    name: 'undeclared',
    config: `name: "undeclared"\nbackend: "js"\nmax_batch_size: 0\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]`,
    files: { 'model.mjs': 'export default { execute() { return []; } };' },
  },
  { name: 'exotic', config: `name: "exotic"\nbackend: "tensorflow"\nmax_batch_size: 0\n${IO}`, files: { 'model.savedmodel': '' } },
];

let server: Awaited<ReturnType<typeof startTestServer>>;
let http: HttpClient;
let grpc: GrpcClient;
let removeRepository: () => Promise<void>;

beforeAll(async () => {
  const repo = await makeRepository([{ name: 'simple', model: simpleAddSub(), config: SIMPLE_CONFIG }]);
  removeRepository = repo.remove;
  for (const model of JS_MODELS) {
    await mkdir(join(repo.dir, model.name, '1'), { recursive: true });
    await writeFile(join(repo.dir, model.name, 'config.pbtxt'), model.config);
    for (const [path, text] of Object.entries(model.files)) {
      await mkdir(join(repo.dir, model.name, '1', path, '..'), { recursive: true });
      await writeFile(join(repo.dir, model.name, '1', path), text);
    }
  }
  // A small heap for model code, so that the out-of-memory case dies quickly.
  server = await startTestServer([repo.dir], { strictReadiness: false, workerHeapLimitBytes: 64 * 2 ** 20 });
  http = new HttpClient({ url: server.url });
  grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
});

afterAll(async () => {
  await http?.close();
  await grpc?.close();
  await server?.close();
  await removeRepository?.();
});

async function failure(promise: Promise<unknown>): Promise<BatchwiseClientError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(BatchwiseClientError);
  return error as BatchwiseClientError;
}

const x = (values: number[], rows = 1) => ({
  name: 'X',
  datatype: 'FP32' as const,
  shape: [rows, values.length / rows],
  data: new Float32Array(values),
});

describe('batch semantics', () => {
  // full_batcher sends a batch only when its 8 rows are queued: the four requests (8 rows) meet in
  // one execute call however far apart a loaded machine delivers them, not by a race with the delay.
  it('hands concurrent requests to one execute call, each with only its own rows, and counts the batch', async () => {
    const before = (await http.modelStatistics('full_batcher'))[0]!;
    const rows = [
      [1, 2],
      [3, 4, 5, 6],
      [7, 8],
      [9, 10, 11, 12, 13, 14, 15, 16],
    ];
    const clients = [http, grpc, http, grpc];
    const results = await Promise.all(
      rows.map((values, i) => clients[i]!.infer({ model: 'full_batcher', id: `r${i}`, inputs: [x(values, values.length / 2)] })),
    );
    results.forEach((result, i) => {
      const byName = new Map(result.outputs.map((o) => [o.name, o]));
      expect(Array.from(byName.get('Y')!.data as Float32Array)).toEqual(rows[i]!.map((v) => v * 2));
      expect(byName.get('Y')!.shape).toEqual([rows[i]!.length / 2, 2]);
      expect(Array.from(byName.get('N')!.data as Int32Array)).toEqual(new Array(rows[i]!.length / 2).fill(4));
    });
    const after = (await http.modelStatistics('full_batcher'))[0]!;
    expect(after.execution_count - before.execution_count).toBe(1);
    expect(after.inference_count - before.inference_count).toBe(8);
    expect(after.inference_stats.success.count - before.inference_stats.success.count).toBe(4);
  });

  // Between requests one at a time the worker waits parked, and small batches and answers go through
  // shared memory (backends/js/parked-channel.ts); those over its 64 KiB slot go by postMessage.
  it('one request at a time, small and over 64 KiB, answers each exactly, its errors included', async () => {
    const lengths = [4, 30_000, 1, 4, 70_000, 4, 16_400, 16_383, 2, 4];
    for (let round = 0; round < 3; round++) {
      for (const [i, length] of lengths.entries()) {
        const values = Float32Array.from({ length }, (_, j) => (j % 1000) + i + round);
        const client = i % 2 ? grpc : http;
        const result = await client.infer({ model: 'doubler', inputs: [{ name: 'X', datatype: 'FP32', shape: [length], data: values }] });
        expect(result.outputs[0]!.shape).toEqual([length]);
        expect(Array.from(result.outputs[0]!.data as Float32Array)).toEqual(Array.from(values, (v) => v * 2));
        if (i % 3 === 0) {
          const error = await failure(
            http.infer({ model: 'doubler', inputs: [{ name: 'X', datatype: 'FP32', shape: [1], data: new Float32Array([-1]) }] }),
          );
          expect(error.httpStatus).toBe(400);
          expect(error.message).toContain('negative input');
        }
      }
    }
  });

  it('gives each request the outputs it asked for', async () => {
    const result = await http.infer({ model: 'batcher', inputs: [x([1, 1])], outputs: ['N'] });
    expect(result.outputs.map((o) => o.name)).toEqual(['N']);
  });

  it('fails only the request whose response is an error (INVALID_ARG: 400 over HTTP, 3 over gRPC)', async () => {
    // Two rows each: 8 rows, one full batch of full_batcher (see above).
    const before = (await http.modelStatistics('full_batcher'))[0]!;
    const [good, badHttp, badGrpc, alsoGood] = await Promise.allSettled([
      http.infer({ model: 'full_batcher', inputs: [x([1, 2, 3, 4], 2)] }),
      http.infer({ model: 'full_batcher', id: 'neg-http', inputs: [x([-1, 2, 3, 4], 2)] }),
      grpc.infer({ model: 'full_batcher', id: 'neg-grpc', inputs: [x([-1, 2, 3, 4], 2)] }),
      grpc.infer({ model: 'full_batcher', inputs: [x([5, 6, 7, 8], 2)] }),
    ]);
    expect(good.status).toBe('fulfilled');
    expect(alsoGood.status).toBe('fulfilled');
    const n = (good as PromiseFulfilledResult<Awaited<ReturnType<HttpClient['infer']>>>).value.outputs.find((o) => o.name === 'N')!;
    expect((n.data as Int32Array)[0]).toBe(4);
    const httpError = (badHttp as PromiseRejectedResult).reason as BatchwiseClientError;
    expect(httpError.httpStatus).toBe(400);
    expect(httpError.message).toContain("model 'full_batcher': negative input in request neg-http");
    const grpcError = (badGrpc as PromiseRejectedResult).reason as BatchwiseClientError;
    expect(grpcError.grpcCode).toBe(3);
    expect(grpcError.message).toContain('negative input in request neg-grpc');
    const after = (await http.modelStatistics('full_batcher'))[0]!;
    expect(after.inference_stats.fail.count - before.inference_stats.fail.count).toBe(2);
    expect(after.inference_stats.success.count - before.inference_stats.success.count).toBe(2);
  });

  it('reports the backend as the platform, and the config as Triton shows a backend model', async () => {
    const metadata = await http.modelMetadata('batcher');
    expect(metadata.platform).toBe('js');
    const config = (await grpc.modelConfig('batcher')) as Record<string, unknown>;
    expect(config['backend']).toBe('js');
    expect(config['platform'] ?? '').toBe('');
  });
});

describe('user code failing', () => {
  const run = (mode: string) =>
    http.infer({ model: 'faulty', inputs: [{ name: 'X', datatype: 'FP32', shape: [1], data: [1] }], parameters: { mode } });
  const works = async () => expect(Array.from((await run('ok')).outputs[0]!.data as Float32Array)).toEqual([2]);

  it.each([
    ['throw', /model 'faulty': execute\(\) failed: user code threw/],
    ['reject', /model 'faulty': execute\(\) failed: user promise rejected/],
    ['exit', /model 'faulty': its instance crashed \(exited with code 1\)/],
    ['wrong-type', /model 'faulty' output 'Y' is FP64, but its config declares FP32/],
    ['wrong-shape', /model 'faulty' output 'Y' has shape \[2\], but its config allows \[1\]/],
  ])('%s: 500 naming the model, and the next request is served', async (mode, message) => {
    const error = await failure(run(mode));
    expect(error.httpStatus).toBe(500);
    expect(error.message).toMatch(message);
    await works();
  });

  it('an execute that never returns fails after batchwise_execute_timeout_ms and its instance is replaced', async () => {
    const started = Date.now();
    const error = await failure(run('spin'));
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
    expect(error.httpStatus).toBe(500);
    expect(error.message).toMatch(/model 'faulty': execute\(\) did not finish within 1500 ms \(parameter batchwise_execute_timeout_ms\)/);
    await works();
    expect(await http.isServerReady()).toBe(true);
  });

  it('model code outgrowing its heap limit kills its worker alone: 500 naming the model, then served again', async () => {
    const error = await failure(run('oom'));
    expect(error.httpStatus).toBe(500);
    expect(error.message).toMatch(/model 'faulty': its instance crashed \(.*out of memory/i);
    await works();
    expect(await http.isServerReady()).toBe(true);
  });
});

describe('load failures', () => {
  const reasonOf = async (name: string) => (await http.repositoryIndex()).find((e) => e.name === name);

  it('initialize() throwing fails the load, naming the model', async () => {
    const entry = await reasonOf('bad_init');
    expect(entry?.state).toBe('UNAVAILABLE');
    expect(entry?.reason).toMatch(/model 'bad_init' \(backend js\): initialize\(\) failed: vocabulary missing/);
  });

  it('a python model without execute() fails to load saying so (the Python backend: python-backend.test.ts)', async () => {
    const entry = await reasonOf('snake');
    expect(entry?.state).toBe('UNAVAILABLE');
    expect(entry?.reason).toMatch(
      /model 'snake' \(backend python\): AttributeError: TritonPythonModel in .*model\.py has no execute\(self, requests\) method/,
    );
  });

  it('a JavaScript model must declare its inputs and outputs', async () => {
    expect((await reasonOf('undeclared'))?.reason).toMatch(/inputs and outputs must be declared for backend js/);
  });

  it('an unknown backend lists the supported ones', async () => {
    expect((await reasonOf('exotic'))?.reason).toMatch(/unknown backend 'tensorflow'; supported backends: 'onnxruntime', 'js'/);
  });
});

describe('calls to other models (BLS)', () => {
  const a = Int32Array.from({ length: 32 }, (_, i) => i * 7 - 50);
  const b = Int32Array.from({ length: 32 }, (_, i) => 1000 - i * i);
  const inputs = [
    { name: 'A', datatype: 'INT32' as const, shape: [2, 16], data: a },
    { name: 'B', datatype: 'INT32' as const, shape: [2, 16], data: b },
  ];

  it('gets the called ONNX model’s outputs, equal to the model run in-process by ONNX Runtime', async () => {
    const ort = loadOrt();
    const session = await ort.InferenceSession.create(serializeModel(simpleAddSub()));
    const expected = await session.run({ INPUT0: new ort.Tensor('int32', a, [2, 16]), INPUT1: new ort.Tensor('int32', b, [2, 16]) });
    await session.release();
    for (const client of [http, grpc]) {
      const result = await client.infer({ model: 'caller', inputs });
      const byName = new Map(result.outputs.map((o) => [o.name, o]));
      expect(Array.from(byName.get('SUM')!.data as Int32Array)).toEqual(Array.from(expected['OUTPUT0']!.data as Int32Array));
      expect(Array.from(byName.get('DIFF')!.data as Int32Array)).toEqual(Array.from(expected['OUTPUT1']!.data as Int32Array));
      expect(Buffer.from((byName.get('CALLED')!.data as Uint8Array[])[0]!).toString()).toBe('simple/1');
    }
  });

  it('an unknown model is a typed error model code can catch and answer with its own', async () => {
    const error = await failure(http.infer({ model: 'caller', inputs, parameters: { mode: 'unknown' } }));
    expect(error.httpStatus).toBe(404);
    expect(error.message).toMatch(/caught INVALID_ARG from no_such_model: Request for unknown model: 'no_such_model' is not found/);
  });

  it('the called model’s error comes back with its code', async () => {
    const error = await failure(grpc.infer({ model: 'caller', inputs, parameters: { mode: 'bad-shape' } }));
    expect(error.grpcCode).toBe(3);
    expect(error.message).toMatch(/simple/);
  });
});

describe('npm packages from the model folder', () => {
  it('resolves a package in the model’s own node_modules (model.js, BYTES in and out)', async () => {
    const result = await http.infer({ model: 'padder', inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [2], data: ['ab', 'héllo'] }] });
    expect((result.outputs[0]!.data as Uint8Array[]).map((e) => Buffer.from(e).toString())).toEqual(['****ab', '*héllo']);
  });
});
