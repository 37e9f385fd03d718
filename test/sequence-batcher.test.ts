/**
 * Stateful models (issue 28) on a real server: Triton's sequence examples as its clients drive them
 * over HTTP and gRPC, every control kind and datatype, uint64 and string ids, implicit state (zeros
 * and a data_file) and what it holds of the memory budget, a JavaScript model keeping state per
 * sequence, idle release, Triton's refusals in its words, the stickiness cookie, metadata and
 * metrics. Shutdown and reload have a server of their own at the end.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, type InferResult } from '@batchwise/client';
import { PROTO_DIR } from '@batchwise/protocol';
import { controlEcho, runningSum, tritonSimpleDynaSequence, tritonSimpleSequence } from '@batchwise/modelgen';
import type { RepositoryModel } from './support/repository.ts';
import { postJson, serveModels, startTestServer, type ServedModels } from './support/server.ts';
import { status, unaryCall, upstreamClients, type AnyClient } from './support/upstream-grpc.ts';
import { makeRepository } from './support/repository.ts';

const bool = (kind: string, field: string, values: string) => `{ kind: ${kind} ${field}: [ ${values} ] }`;
const control = (name: string, spec: string) => `{ name: "${name}" control [ ${spec} ] }`;
const START = control('START', bool('CONTROL_SEQUENCE_START', 'int32_false_true', '0, 1'));
const END = control('END', bool('CONTROL_SEQUENCE_END', 'int32_false_true', '0, 1'));
const READY = control('READY', bool('CONTROL_SEQUENCE_READY', 'int32_false_true', '0, 1'));
const corrid = (type: string) => control('CORRID', `{ kind: CONTROL_SEQUENCE_CORRID data_type: ${type} }`);
const INT_IO = `input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]`;

/** Triton's docs/examples configs, as written there. */
const SIMPLE_SEQUENCE = `name: "simple_sequence"
platform: "onnxruntime_onnx"
max_batch_size: 8
sequence_batching { control_input [ ${START}, ${READY} ] }
${INT_IO}
instance_group [ { kind: KIND_CPU } ]`;
const SIMPLE_DYNA_SEQUENCE = `name: "simple_dyna_sequence"
platform: "onnxruntime_onnx"
max_batch_size: 8
sequence_batching {
  max_sequence_idle_microseconds: 10000000
  oldest { max_candidate_sequences: 1024 max_queue_delay_microseconds: 10000 }
  control_input [ ${START}, ${END}, ${READY}, ${corrid('TYPE_UINT64')} ]
}
${INT_IO}
instance_group [ { count: 2 kind: KIND_CPU } ]`;

type Echo = Parameters<typeof controlEcho>[0];
const CONTROL_FIELD = {
  INT32: 'int32_false_true: [ 3, 9 ]',
  FP32: 'fp32_false_true: [ 0.5, 1.5 ]',
  BOOL: 'bool_false_true: [ false, true ]',
};
const CONFIG_TYPE: Record<string, string> = {
  INT32: 'TYPE_INT32',
  FP32: 'TYPE_FP32',
  BOOL: 'TYPE_BOOL',
  UINT64: 'TYPE_UINT64',
  INT64: 'TYPE_INT64',
  UINT32: 'TYPE_UINT32',
  BYTES: 'TYPE_STRING',
};

/** A model passing each control back as <name>_OUT: what the batcher fed it, in each datatype. */
function echoModel(name: string, echo: Echo, strategy: string, maxBatchSize = 4): RepositoryModel {
  const kinds = { START: 'CONTROL_SEQUENCE_START', END: 'CONTROL_SEQUENCE_END', READY: 'CONTROL_SEQUENCE_READY' } as const;
  const controls = (['START', 'END', 'READY'] as const)
    .filter((k) => echo[k.toLowerCase() as 'start'])
    .map((k) => control(k, `{ kind: ${kinds[k]} ${CONTROL_FIELD[echo[k.toLowerCase() as 'start']!]} }`));
  if (echo.corrid) controls.push(corrid(CONFIG_TYPE[echo.corrid]!));
  const outputs = ['START', 'END', 'READY', 'CORRID']
    .filter((k) => echo[k.toLowerCase() as keyof Echo])
    .map((k) => `{ name: "${k}_OUT" data_type: ${CONFIG_TYPE[echo[k.toLowerCase() as 'corrid']!]} dims: [ 1 ] }`);
  return {
    name,
    model: controlEcho({ ...echo, batch: maxBatchSize > 0 }),
    config: `name: "${name}"
max_batch_size: ${maxBatchSize}
sequence_batching { ${strategy} control_input [ ${controls.join(', ')} ] }
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }, ${outputs.join(', ')} ]`,
  };
}

const WIDTH = 1024;
/** 3, 2, 1, 0 in the first four elements, little-endian FP32, then zeros. */
const INITIAL_SUM = Buffer.from(Float32Array.from({ length: WIDTH }, (_, i) => Math.max(0, 3 - i)).buffer);
const runningSumConfig = (name: string, initial: string) => `name: "${name}"
max_batch_size: 8
sequence_batching {
  state [ { input_name: "ACC_IN" output_name: "ACC_OUT" data_type: TYPE_FP32 dims: [ ${WIDTH} ]
    initial_state: { name: "start" data_type: TYPE_FP32 dims: [ ${WIDTH} ] ${initial} } } ]
}
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]`;

/** Triton's QA dyna_sequence model with a string CORRID, in JavaScript, as the example repository has it. */
const STRING_DYNA_JS = readFileSync(
  new URL('../examples/model_repository/simple_string_dyna_sequence/1/model.mjs', import.meta.url),
  'utf8',
);

const MODELS: RepositoryModel[] = [
  { name: 'simple_sequence', model: tritonSimpleSequence(), config: SIMPLE_SEQUENCE },
  // Triton's `simple_` sequence ensemble: the sequence's id and flags reach the step.
  {
    name: 'sequence_ensemble',
    config: `name: "sequence_ensemble"
platform: "ensemble"
max_batch_size: 8
${INT_IO}
ensemble_scheduling { step [ { model_name: "simple_sequence" model_version: -1 input_map { key: "INPUT" value: "INPUT" } output_map { key: "OUTPUT" value: "OUTPUT" } } ] }`,
  },
  { name: 'simple_dyna_sequence', model: tritonSimpleDynaSequence(), config: SIMPLE_DYNA_SEQUENCE },
  echoModel('echo_direct', { start: 'INT32', end: 'FP32', ready: 'BOOL', corrid: 'UINT64' }, 'direct { }'),
  echoModel('echo_oldest', { start: 'BOOL', end: 'INT32', ready: 'FP32', corrid: 'INT64' }, 'oldest { max_candidate_sequences: 4 }'),
  echoModel('echo_u32', { corrid: 'UINT32' }, ''),
  echoModel('echo_i32', { start: 'FP32', corrid: 'INT32' }, 'oldest { }'),
  echoModel('echo_string', { end: 'BOOL', corrid: 'BYTES' }, ''),
  echoModel('echo_unbatched', { start: 'INT32', ready: 'INT32', corrid: 'UINT64' }, '', 0),
  { name: 'sum_zero', model: runningSum(WIDTH), config: runningSumConfig('sum_zero', 'zero_data: true') },
  {
    name: 'sum_file',
    model: runningSum(WIDTH),
    config: runningSumConfig('sum_file', 'data_file: "start.bin"'),
    files: { 'initial_state/start.bin': INITIAL_SUM },
  },
  {
    name: 'simple_string_dyna_sequence',
    config: `name: "simple_string_dyna_sequence"
backend: "js"
max_batch_size: 8
sequence_batching {
  oldest { max_candidate_sequences: 8 max_queue_delay_microseconds: 1000 }
  control_input [ ${START}, ${END}, ${corrid('TYPE_STRING')} ]
}
${INT_IO}
instance_group [ { count: 2 kind: KIND_CPU } ]`,
    files: { '1/model.mjs': STRING_DYNA_JS },
  },
  {
    name: 'quick_idle',
    model: tritonSimpleSequence(),
    config: SIMPLE_SEQUENCE.replace('"simple_sequence"', '"quick_idle"').replace(
      'sequence_batching {',
      'sequence_batching { max_sequence_idle_microseconds: 500000',
    ),
  },
];

let served: ServedModels;
let grpc: GrpcClient;
let upstream: AnyClient;
beforeAll(async () => {
  served = await serveModels(MODELS);
  grpc = new GrpcClient({ url: `127.0.0.1:${served.server.grpcPort}` });
  upstream = upstreamClients(`127.0.0.1:${served.server.grpcPort}`, PROTO_DIR).inference;
});
afterAll(async () => {
  upstream?.close();
  await grpc?.close();
  await served?.close();
});

const url = (model: string) => `${served.server.url}/v2/models/${model}/infer`;
const intInput = (value: number) => [{ name: 'INPUT', datatype: 'INT32' as const, shape: [1, 1], data: [value] }];
const flags = (id: number | string, i: number, n: number) => ({ sequence_id: id, sequence_start: i === 0, sequence_end: i === n - 1 });
const first = (result: InferResult, name = 'OUTPUT') => result.outputs.find((o) => o.name === name)!.data[0];

/** Sends a whole sequence, one request after the other, over HTTP; answers OUTPUT's first element each. */
async function httpSequence(model: string, id: number | string, values: readonly number[]): Promise<unknown[]> {
  const out: unknown[] = [];
  for (let i = 0; i < values.length; i++) {
    out.push(first(await served.client.infer({ model, inputs: intInput(values[i]!), parameters: flags(id, i, values.length) })));
  }
  return out;
}

const VALUES = [0, 11, 7, 5, 3, 2, 0, 1];
/** The values negated, 0 staying 0 (not -0). */
const NEGATED = VALUES.map((v) => 0 - v || 0);

describe("Triton's sequence examples, as its clients use them", () => {
  it('simple_sequence (direct): uint64 and string ids over HTTP, three sequences interleaved', async () => {
    const answers = await Promise.all([
      httpSequence('simple_sequence', 1000, VALUES),
      httpSequence('simple_sequence', 1001, [100, ...NEGATED.slice(1)]),
      httpSequence('simple_sequence', 'e333c95a-07fc-42d2-ab16-033b1a566ed5', [20, ...NEGATED.slice(1)]),
    ]);
    expect(answers).toEqual([
      [1, ...VALUES.slice(1)],
      [101, ...NEGATED.slice(1)],
      [21, ...NEGATED.slice(1)],
    ]);
  });

  it('simple_dyna_sequence (oldest, CORRID): every request of two sequences written to one gRPC stream at once, answered in order', async () => {
    const stream = grpc.streamInfer();
    for (const id of [1000, 1001]) {
      VALUES.forEach((v, i) =>
        stream.write({
          model: 'simple_dyna_sequence',
          id: `${id}_${i}`,
          inputs: intInput(id === 1000 ? v : -v),
          parameters: flags(id, i, VALUES.length),
        }),
      );
    }
    stream.end();
    const got: Record<string, unknown[]> = { '1000': [], '1001': [] };
    for await (const response of stream) {
      if (!response.ok) throw response.error;
      got[response.result.id!.split('_')[0]!]!.push(first(response.result));
    }
    const expected = (id: number, sign: number) => VALUES.map((v, i) => (i === 0 ? 1 : sign * v) + (i === VALUES.length - 1 ? id : 0));
    expect(got).toEqual({ '1000': expected(1000, 1), '1001': expected(1001, -1) });
  });

  it('a JavaScript model with a string CORRID keeps its state per sequence (Triton QA dyna_sequence), over HTTP and gRPC unary', async () => {
    const grpcSequence = async (id: string, values: number[]) => {
      const out: unknown[] = [];
      for (let i = 0; i < values.length; i++) {
        const result = await grpc.infer({
          model: 'simple_string_dyna_sequence',
          inputs: intInput(values[i]!),
          parameters: flags(id, i, values.length),
        });
        out.push(first(result));
      }
      return out;
    };
    const [overHttp, overGrpc] = await Promise.all([
      httpSequence('simple_string_dyna_sequence', '1002', [20, -11, -7, -1]),
      grpcSequence('1003', [5, 6, 7]),
    ]);
    expect(overHttp).toEqual([20, 9, 2, 1 + 1002]);
    expect(overGrpc).toEqual([5, 11, 18 + 1003]);
  });
});

describe('control inputs', () => {
  const echo = async (model: string, id: number | string, n: number) => {
    const rows: Record<string, unknown>[] = [];
    const shape = model === 'echo_unbatched' ? [1] : [1, 1];
    for (let i = 0; i < n; i++) {
      const inputs = [{ name: 'INPUT', datatype: 'INT32' as const, shape, data: [i] }];
      const result = await served.client.infer({ model, inputs, parameters: flags(id, i, n) });
      rows.push(
        Object.fromEntries(
          result.outputs
            .filter((o) => o.name !== 'OUTPUT')
            .map((o) => [o.name, o.data[0] instanceof Uint8Array ? Buffer.from(o.data[0]).toString() : o.data[0]]),
        ),
      );
    }
    return rows;
  };

  it('START, END and READY in INT32, FP32 and BOOL (1 and 0 here) with their false/true values, CORRID in every datatype', async () => {
    expect(await echo('echo_direct', 77, 3)).toEqual([
      { START_OUT: 9, END_OUT: 0.5, READY_OUT: 1, CORRID_OUT: 77n },
      { START_OUT: 3, END_OUT: 0.5, READY_OUT: 1, CORRID_OUT: 77n },
      { START_OUT: 3, END_OUT: 1.5, READY_OUT: 1, CORRID_OUT: 77n },
    ]);
    expect(await echo('echo_oldest', 78, 2)).toEqual([
      { START_OUT: 1, END_OUT: 3, READY_OUT: 1.5, CORRID_OUT: 78n },
      { START_OUT: 0, END_OUT: 9, READY_OUT: 1.5, CORRID_OUT: 78n },
    ]);
    expect(await echo('echo_u32', 2 ** 32 + 5, 1)).toEqual([{ CORRID_OUT: 5 }]);
    expect(await echo('echo_i32', 2 ** 32 - 2, 1)).toEqual([{ START_OUT: 1.5, CORRID_OUT: -2 }]);
    expect(await echo('echo_string', 'séquence-1', 2)).toEqual([
      { END_OUT: 0, CORRID_OUT: 'séquence-1' },
      { END_OUT: 1, CORRID_OUT: 'séquence-1' },
    ]);
    expect(await echo('echo_unbatched', 5, 2)).toEqual([
      { START_OUT: 9, READY_OUT: 9, CORRID_OUT: 5n },
      { START_OUT: 3, READY_OUT: 9, CORRID_OUT: 5n },
    ]);
  });

  it('a uint64 id past 2^53 arrives exact over HTTP JSON, and over gRPC as the int64 that carries it (-1 is 2^64-1)', async () => {
    const body = (start: boolean, end: boolean) =>
      `{"parameters":{"sequence_id":18446744073709551615,"sequence_start":${start},"sequence_end":${end}},` +
      `"inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[1]}],"outputs":[{"name":"CORRID_OUT"}]}`;
    for (const start of [true, false]) {
      const raw = await fetch(url('echo_direct'), { method: 'POST', body: body(start, false) }).then((r) => r.text());
      expect(raw).toContain('"data":[18446744073709551615]');
    }
    const message = (start: boolean, end: boolean) => ({
      model_name: 'echo_direct',
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], contents: { int_contents: [1] } }],
      outputs: [{ name: 'CORRID_OUT' }],
      parameters: { sequence_id: { int64_param: '-1' }, sequence_start: { bool_param: start }, sequence_end: { bool_param: end } },
    });
    // The same sequence: it started over HTTP, it continues and ends over gRPC.
    const overGrpc = await unaryCall(upstream, 'ModelInfer', message(false, true));
    expect(Buffer.from(overGrpc.raw_output_contents[0]).readBigUInt64LE()).toBe(2n ** 64n - 1n);
  });
});

describe('implicit state', () => {
  const sum = (model: string, id: number, i: number, n: number, value: number) =>
    served.client.infer({
      model,
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, WIDTH], data: new Float32Array(WIDTH).fill(value) }],
      parameters: flags(id, i, n),
    });
  const head = (result: InferResult) => Array.from((result.outputs[0]!.data as Float32Array).subarray(0, 5));

  it('carries the state output to the next request, from zeros or the data_file on START; held in the memory budget meanwhile', async () => {
    // Between requests nothing else is held: the memory guard's charge is the states'.
    const held = async () => {
      const text = await (await fetch(`http://127.0.0.1:${served.server.metricsPort}/metrics`)).text();
      const read = (pattern: RegExp) => Number(pattern.exec(text)?.[1]);
      return [
        read(/^batchwise_sequence_state_bytes\{model="sum_file",version="1"\} (\d+)$/m),
        read(/^batchwise_memory_accounted_bytes (\d+)$/m),
      ];
    };
    expect(head(await sum('sum_zero', 1, 0, 3, 1))).toEqual([1, 1, 1, 1, 1]);
    expect(head(await sum('sum_zero', 1, 1, 3, 2))).toEqual([3, 3, 3, 3, 3]);
    expect(head(await sum('sum_file', 1, 0, 3, 1))).toEqual([4, 3, 2, 1, 1]);
    expect(await held()).toEqual([WIDTH * 4, 2 * WIDTH * 4]);
    expect(head(await sum('sum_file', 1, 1, 3, 1))).toEqual([5, 4, 3, 2, 2]);
    expect(head(await sum('sum_file', 1, 2, 3, 1))).toEqual([6, 5, 4, 3, 3]);
    expect(await held()).toEqual([0, WIDTH * 4]);
    expect(head(await sum('sum_zero', 1, 0, 1, 7))).toEqual([7, 7, 7, 7, 7]);
  });
});

describe("Triton's refusals, over HTTP and gRPC", () => {
  const grpcError = async (request: object) => {
    try {
      await unaryCall(upstream, 'ModelInfer', {
        inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], contents: { int_contents: [1] } }],
        ...request,
      });
    } catch (error) {
      return { code: (error as { code: number }).code, details: (error as { details: string }).details };
    }
    throw new Error('no error');
  };
  const httpError = async (model: string, parameters: object, shape = [1, 1]) => {
    const r = await postJson(url(model), {
      parameters,
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape, data: new Array(shape[0]).fill(1) }],
    });
    return [r.status, r.json.error];
  };

  it('no START on the first request, a zero or empty id, batch size above 1, a CORRID of the other kind, an unreadable parameter', async () => {
    expect(await httpError('simple_sequence', { sequence_id: 424242 })).toEqual([
      400,
      "inference request for sequence 424242 to model 'simple_sequence' must specify the START flag on the first request of the sequence",
    ]);
    expect(await httpError('simple_sequence', {})).toEqual([
      400,
      "inference request to model 'simple_sequence' must specify a non-zero or non-empty correlation ID",
    ]);
    expect(await httpError('simple_sequence', { sequence_id: '', sequence_start: true })).toEqual([
      400,
      "inference request to model 'simple_sequence' must specify a non-zero or non-empty correlation ID",
    ]);
    expect(await httpError('simple_sequence', { sequence_id: 3, sequence_start: true }, [2, 1])).toEqual([
      400,
      "inference request to model 'simple_sequence' must specify batch-size 1 due to requirements of sequence batcher",
    ]);
    expect(await httpError('simple_dyna_sequence', { sequence_id: 'x', sequence_start: true })).toEqual([
      400,
      "[request id: <id_unknown>] sequence batching control 'CORRID' data-type is 'BYTES', but model 'simple_dyna_sequence' expects 'UINT64'",
    ]);
    expect(await httpError('echo_string', { sequence_id: 5, sequence_start: true })).toEqual([
      400,
      "[request id: <id_unknown>] sequence batching control 'CORRID' data-type is 'UINT64', but model 'echo_string' expects 'BYTES'",
    ]);
    expect(await httpError('simple_sequence', { sequence_id: -3 })).toEqual([400, "Unable to parse 'sequence_id'"]);
    expect(await httpError('simple_sequence', { sequence_id: 3, sequence_start: 1 })).toEqual([400, "Unable to parse 'sequence_start'"]);

    expect(await grpcError({ model_name: 'simple_sequence', parameters: { sequence_id: { string_param: 'nobody' } } })).toEqual({
      code: status.INVALID_ARGUMENT,
      details:
        "inference request for sequence nobody to model 'simple_sequence' must specify the START flag on the first request of the sequence",
    });
    expect(await grpcError({ model_name: 'simple_sequence', parameters: { sequence_id: { bool_param: true } } })).toEqual({
      code: status.INVALID_ARGUMENT,
      details: "invalid value type for 'sequence_id' parameter, expected int64_param or string_param.",
    });
    expect(
      await grpcError({
        model_name: 'simple_sequence',
        parameters: { sequence_id: { int64_param: '5' }, sequence_start: { int64_param: '1' } },
      }),
    ).toEqual({
      code: status.INVALID_ARGUMENT,
      details: "invalid value type for 'sequence_start' parameter, expected bool_param.",
    });
  });

  it('a sequence idle for max_sequence_idle_microseconds loses its slot: its next request without START gets the START error', async () => {
    expect(await httpSequence('quick_idle', 31, [5, 6])).toEqual([6, 6]);
    await served.client.infer({ model: 'quick_idle', inputs: intInput(1), parameters: { sequence_id: 32, sequence_start: true } });
    await new Promise((resolve) => setTimeout(resolve, 900));
    await expect(served.client.infer({ model: 'quick_idle', inputs: intInput(1), parameters: { sequence_id: 32 } })).rejects.toThrow(
      "inference request for sequence 32 to model 'quick_idle' must specify the START flag on the first request of the sequence",
    );
    const text = await (await fetch(`http://127.0.0.1:${served.server.metricsPort}/metrics`)).text();
    expect(text).toMatch(/^batchwise_sequence_idle_releases_total\{model="quick_idle",version="1"\} 1$/m);
    expect(text).toMatch(/^batchwise_sequence_slots\{model="simple_dyna_sequence",version="1"\} 2048$/m);
  });
});

describe('what else the server says', () => {
  it("an ensemble with a sequence model as a step passes the sequence on: the model's own answers", async () => {
    const answers = await Promise.all([
      httpSequence('sequence_ensemble', 2000, VALUES),
      httpSequence('sequence_ensemble', 'through-an-ensemble', [20, ...NEGATED.slice(1)]),
      httpSequence('simple_sequence', 2001, [100, ...NEGATED.slice(1)]),
    ]);
    expect(answers).toEqual([
      [1, ...VALUES.slice(1)],
      [21, ...NEGATED.slice(1)],
      [101, ...NEGATED.slice(1)],
    ]);
  });

  it("lists the sequence extension, string ids included, and sets the stickiness cookie on a sequence's replies", async () => {
    const metadata = await served.client.serverMetadata();
    expect(metadata.extensions).toEqual(expect.arrayContaining(['sequence', 'sequence(string_id)']));
    const reply = await fetch(url('simple_sequence'), {
      method: 'POST',
      body: JSON.stringify({ parameters: { sequence_id: 'a b', sequence_start: true, sequence_end: true }, inputs: intInput(1) }),
    });
    expect(reply.headers.get('set-cookie')).toBe('batchwise-sequence=a%20b; Path=/; HttpOnly');
    const plain = await fetch(`${served.server.url}/v2/models/sum_zero/infer`, {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 1], data: [1] }] }),
    });
    expect(plain.headers.get('set-cookie')).toBeNull();
  });
});

describe('stopping', () => {
  it("a sequence in flight finishes within the shutdown grace period, new sequences are refused; a reload forgets the old version's sequences", async () => {
    const repo = await makeRepository([{ name: 'simple_sequence', model: tritonSimpleSequence(), config: SIMPLE_SEQUENCE }]);
    const server = await startTestServer([repo.dir], { modelControlMode: 'explicit', loadModels: ['simple_sequence'] });
    const send = (parameters: object) => postJson(`${server.url}/v2/models/simple_sequence/infer`, { parameters, inputs: intInput(1) });
    try {
      expect((await send({ sequence_id: 1, sequence_start: true })).status).toBe(200);
      // A reload (the load API) swaps versions: the new one does not know sequence 1.
      expect((await postJson(`${server.url}/v2/repository/models/simple_sequence/load`, {})).status).toBe(200);
      expect(await send({ sequence_id: 1 })).toMatchObject({
        status: 400,
        json: { error: expect.stringContaining('must specify the START flag') },
      });
      expect((await send({ sequence_id: 2, sequence_start: true })).status).toBe(200);
      const closing = server.close({ graceMs: 1000 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(await send({ sequence_id: 3, sequence_start: true })).toEqual({
        status: 503,
        json: { error: 'Server is stopping, scheduler for model has stopped accepting new inference requests' },
      });
      expect((await send({ sequence_id: 2 })).status).toBe(200);
      expect((await send({ sequence_id: 2, sequence_end: true })).status).toBe(200);
      await closing;
    } finally {
      await server.close().catch(() => undefined);
      await repo.remove();
    }
  });
});
