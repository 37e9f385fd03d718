/**
 * Sequences through ensembles, as Triton's sequence-batcher tests run them (qa/L0_sequence_batcher with
 * ENSEMBLES=1): the request's correlation id and flags reach the step model that batches sequences, in
 * Triton's three forms (`simple_`: the sequence model alone; `sequence_`: a nop before it; `fan_`: nops
 * around it), in ensembles that batch and ensembles that do not (`max_batch_size: 0`, whose tensors gain
 * and lose a batch dimension where they meet the batching steps, as Triton reshapes them). Sequences of
 * every ensemble run at once, interleaved, over HTTP binary and gRPC streams, all in the one sequence
 * model's slots; every answer must equal, bit for bit, the same ONNX model run in-process by ONNX Runtime
 * in a loop over that sequence alone. Also: a step's refusal in Triton's words, an id past 2^53 passed on
 * exactly, the response cache refused on such an ensemble, and a batching ensemble over a step that does
 * not batch.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, type InferRequest } from '@batchwise/client';
import { identity, mulberry32, sequenceStateModel, serializeModel } from '@batchwise/modelgen';
import { loadOrt, type OrtSession, type OrtTensor } from '@batchwise/modelgen/test-support/ort.ts';
import { differences, resultValues, type TensorValue } from './support/differential.ts';
import { sequenceStateConfig } from './support/sequence-state.ts';
import { serveModels, type ServedModels } from './support/server.ts';

const WIDTH = 4;
const SEED = Number(process.env['DIFFERENTIAL_SEED'] ?? 36);

const SEQ_CONFIG = sequenceStateConfig({
  name: 'seq',
  width: WIDTH,
  strategy: 'direct { }',
  corrid: 'TYPE_UINT64',
  maxBatchSize: 4,
  instances: 2,
  idleMs: 5000,
});

/** Triton's nop: an identity that batches (the qa nops batch up to 1024). */
const NOP_CONFIG = `name: "nop"
max_batch_size: 64
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
dynamic_batching { }`;

/** An identity that does not batch. */
const NOP_NOBATCH_CONFIG = `name: "nop_nobatch"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]`;

interface Step {
  readonly model: string;
  readonly inputs: Record<string, string>;
  readonly outputs: Record<string, string>;
}

const map = (kind: string, pairs: Record<string, string>) =>
  Object.entries(pairs)
    .map(([key, value]) => `${kind} { key: "${key}" value: "${value}" }`)
    .join(' ');

function ensembleConfig(name: string, maxBatchSize: number, steps: readonly Step[], extra = ''): string {
  return `name: "${name}"
platform: "ensemble"
max_batch_size: ${maxBatchSize}
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ ${WIDTH} ] }, { name: "OUT_CORRID" data_type: TYPE_UINT64 dims: [ 1 ] } ]
ensemble_scheduling { step [ ${steps
    .map((s) => `{ model_name: "${s.model}" model_version: -1 ${map('input_map', s.inputs)} ${map('output_map', s.outputs)} }`)
    .join(', ')} ] }
${extra}`;
}

/** Triton's three sequence ensembles (gen_ensemble_model_utils.py's SequenceEnsembleSchedule). */
const FORMS: Record<string, readonly Step[]> = {
  simple: [{ model: 'seq', inputs: { INPUT: 'INPUT' }, outputs: { OUTPUT: 'OUTPUT', OUT_CORRID: 'OUT_CORRID' } }],
  sequence: [
    { model: 'nop', inputs: { INPUT0: 'INPUT' }, outputs: { OUTPUT0: 'same_input' } },
    { model: 'seq', inputs: { INPUT: 'same_input' }, outputs: { OUTPUT: 'OUTPUT', OUT_CORRID: 'OUT_CORRID' } },
  ],
  fan: [
    { model: 'nop', inputs: { INPUT0: 'INPUT' }, outputs: { OUTPUT0: 'same_input' } },
    { model: 'seq', inputs: { INPUT: 'same_input' }, outputs: { OUTPUT: 'same_output', OUT_CORRID: 'OUT_CORRID' } },
    { model: 'nop', inputs: { INPUT0: 'same_output' }, outputs: { OUTPUT0: 'OUTPUT' } },
  ],
};

interface EnsembleCase {
  readonly name: string;
  readonly batching: boolean;
}
const ENSEMBLES: readonly EnsembleCase[] = Object.keys(FORMS).flatMap((form) => [
  { name: `${form}_seq`, batching: true },
  { name: `${form}_seq_nobatch`, batching: false },
]);

interface SequencePlan {
  readonly ensemble: EnsembleCase;
  readonly id: number;
  readonly grpcStream: boolean;
  readonly inputs: readonly Float32Array[];
}

/** Eighths in [-16, 16]: sums stay exact in FP32. */
function plans(random: () => number): SequencePlan[] {
  const out: SequencePlan[] = [];
  ENSEMBLES.forEach((ensemble, e) => {
    for (let i = 0; i < 3; i++) {
      const length = 2 + Math.floor(random() * 5);
      const inputs = Array.from({ length }, () => Float32Array.from({ length: WIDTH }, () => Math.round(random() * 256 - 128) / 8));
      out.push({ ensemble, id: 5000 + e * 100 + i * 7 + Math.floor(random() * 5), grpcStream: i % 2 === 1, inputs });
    }
  });
  return out;
}

/** The sequence model alone in ONNX Runtime, one sequence at a time, batch 1. */
async function reference(session: OrtSession, plan: SequencePlan): Promise<TensorValue[][]> {
  const ort = loadOrt();
  let state = new Float32Array(WIDTH);
  let step = new Int32Array(1);
  const answers: TensorValue[][] = [];
  const rows = (n: number) => (plan.ensemble.batching ? [1, n] : [n]);
  for (let i = 0; i < plan.inputs.length; i++) {
    const on = (b: boolean) => new ort.Tensor('float32', Float32Array.of(b ? 1 : 0), [1, 1]);
    const results: Record<string, OrtTensor> = await session.run({
      INPUT: new ort.Tensor('float32', plan.inputs[i]!, [1, WIDTH]),
      START: on(i === 0),
      END: on(i === plan.inputs.length - 1),
      READY: on(true),
      CORRID: new ort.Tensor('uint64', BigUint64Array.of(BigInt(plan.id)), [1, 1]),
      STATE_IN: new ort.Tensor('float32', state, [1, WIDTH]),
      STEP_IN: new ort.Tensor('int32', step, [1, 1]),
    });
    state = Float32Array.from(results['STATE_OUT']!.data as Float32Array);
    step = Int32Array.from(results['STEP_OUT']!.data as Int32Array);
    answers.push([
      { name: 'OUTPUT', datatype: 'FP32', shape: rows(WIDTH), data: Float32Array.from(results['OUTPUT']!.data as Float32Array) },
      { name: 'OUT_CORRID', datatype: 'UINT64', shape: rows(1), data: BigUint64Array.of(BigInt(plan.id)) },
    ]);
  }
  return answers;
}

let served: ServedModels;
let grpc: GrpcClient;
let session: OrtSession;
beforeAll(async () => {
  served = await serveModels([
    { name: 'seq', model: sequenceStateModel(WIDTH, 'UINT64'), config: SEQ_CONFIG },
    { name: 'nop', model: identity('FP32', [WIDTH]), config: NOP_CONFIG },
    { name: 'nop_nobatch', model: identity('FP32', [WIDTH], { batch: false }), config: NOP_NOBATCH_CONFIG },
    ...ENSEMBLES.map((e) => ({ name: e.name, config: ensembleConfig(e.name, e.batching ? 4 : 0, FORMS[e.name.split('_')[0]!]!) })),
    {
      name: 'cached_seq',
      config: ensembleConfig('cached_seq', 4, FORMS['simple']!, 'response_cache { enable: true }'),
    },
    {
      name: 'across_batching',
      config: `name: "across_batching"
platform: "ensemble"
max_batch_size: 0
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
ensemble_scheduling { step [
  { model_name: "nop" model_version: -1 input_map { key: "INPUT0" value: "INPUT" } output_map { key: "OUTPUT0" value: "a" } },
  { model_name: "nop_nobatch" model_version: -1 input_map { key: "INPUT0" value: "a" } output_map { key: "OUTPUT0" value: "b" } },
  { model_name: "nop" model_version: -1 input_map { key: "INPUT0" value: "b" } output_map { key: "OUTPUT0" value: "OUTPUT" } }
] }`,
    },
  ]);
  grpc = new GrpcClient({ url: `127.0.0.1:${served.server.grpcPort}` });
  session = await loadOrt().InferenceSession.create(serializeModel(sequenceStateModel(WIDTH, 'UINT64')), { logSeverityLevel: 3 });
});
afterAll(async () => {
  await grpc?.close();
  await served?.close();
});

const request = (plan: SequencePlan, i: number): InferRequest => ({
  model: plan.ensemble.name,
  id: `${plan.id}/${i}`,
  inputs: [{ name: 'INPUT', datatype: 'FP32', shape: plan.ensemble.batching ? [1, WIDTH] : [WIDTH], data: plan.inputs[i]! }],
  parameters: { sequence_id: plan.id, sequence_start: i === 0, sequence_end: i === plan.inputs.length - 1 },
});

async function run(plan: SequencePlan): Promise<TensorValue[][]> {
  const n = plan.inputs.length;
  const answers: TensorValue[][] = [];
  if (plan.grpcStream) {
    // Written whole at once: the stream's order is the sequence's order.
    const stream = grpc.streamInfer();
    for (let i = 0; i < n; i++) stream.write(request(plan, i));
    stream.end();
    for await (const response of stream) {
      if (!response.ok) throw response.error;
      expect(response.result.id).toBe(`${plan.id}/${answers.length}`);
      answers.push(resultValues(response.result));
    }
    return answers;
  }
  for (let i = 0; i < n; i++) answers.push(resultValues(await served.client.infer({ ...request(plan, i), binary: true })));
  return answers;
}

describe('sequences through ensembles (Triton simple_, sequence_ and fan_ forms, batching and not)', () => {
  it(`every answer equals the sequence model's in ONNX Runtime, many sequences at once (seed ${SEED})`, async () => {
    const all = plans(mulberry32(SEED));
    const outcomes = await Promise.all(all.map((plan) => run(plan)));
    const problems: string[] = [];
    for (const [k, plan] of all.entries()) {
      const expected = await reference(session, plan);
      expect(outcomes[k]!.length, `${plan.ensemble.name} ${plan.id}`).toBe(expected.length);
      expected.forEach((want, i) => {
        for (const d of differences(want, outcomes[k]![i]!, { fp16: true, floats: 'bits', bytes: 'any' }))
          problems.push(`${plan.ensemble.name} ${plan.grpcStream ? 'grpc-stream' : 'http-binary'} ${plan.id} step ${i}: ${d}`);
      });
    }
    expect(problems).toEqual([]);
    // Every step went through the one sequence model, one request a step.
    const [stats] = await served.client.modelStatistics('seq');
    const steps = all.reduce((sum, plan) => sum + plan.inputs.length, 0);
    expect(stats!.inference_stats.success.count).toBe(steps);
  }, 60_000);

  it("a request of two rows is the sequence step's refusal, in Triton's words", async () => {
    const error = await served.client
      .infer({
        model: 'simple_seq',
        inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [2, WIDTH], data: new Float32Array(2 * WIDTH) }],
        parameters: { sequence_id: 77, sequence_start: true },
      })
      .then(
        () => undefined,
        (e: Error) => e.message,
      );
    expect(error).toBe(
      "in ensemble 'simple_seq', inference request to model 'seq' must specify batch-size 1 due to requirements of sequence batcher",
    );
  });

  it('a sequence id past 2^53 reaches the step exactly (HTTP JSON)', async () => {
    const id = '18446744073709551557';
    const body = (start: boolean, end: boolean) =>
      `{"inputs":[{"name":"INPUT","datatype":"FP32","shape":[1,${WIDTH}],"data":[1,2,3,4]}],` +
      `"parameters":{"sequence_id":${id},"sequence_start":${start},"sequence_end":${end}}}`;
    const url = `${served.server.url}/v2/models/fan_seq/infer`;
    const post = (text: string) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });
    const first = await post(body(true, false));
    expect(first.status).toBe(200);
    const last = await post(body(false, true));
    const text = await last.text();
    expect(last.status, text).toBe(200);
    expect(text).toContain(`"name":"OUT_CORRID","datatype":"UINT64","shape":[1,1],"data":[${id}]`);
    // The second step of the sequence: the state summed both inputs, END added 1.
    expect(text).toContain(`"name":"OUTPUT","datatype":"FP32","shape":[1,${WIDTH}],"data":[3,5,7,9]`);
  });

  it('an ensemble running a sequence step is refused with response_cache enabled, saying why', async () => {
    const entry = (await served.client.repositoryIndex()).find((e) => e.name === 'cached_seq');
    expect(entry?.state).toBe('UNAVAILABLE');
    expect(entry?.reason).toContain("model 'seq' keeps sequences (sequence_batching)");
    expect(entry?.reason).toContain('disable the response cache');
  });

  it('a tensor crosses from batching steps to one that does not and back, gaining and losing its batch dimension each time', async () => {
    const data = Float32Array.of(0.5, -1, 2, 8);
    const result = await served.client.infer({
      model: 'across_batching',
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [WIDTH], data }],
    });
    expect(result.outputs[0]!.shape).toEqual([WIDTH]);
    expect(Array.from(result.outputs[0]!.data as Float32Array)).toEqual(Array.from(data));
    // Each nop ran a request of one row; nop_nobatch one of [4].
    const [nop] = await served.client.modelStatistics('nop');
    expect(nop!.batch_stats.map((b) => b.batch_size)).toContain(1);
  });
});
