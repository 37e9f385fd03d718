/**
 * Differential test (issue 14): every model of the table below is served by one server and
 * run in-process by ONNX Runtime; random valid requests (fast-check) go over HTTP JSON, HTTP
 * binary, gRPC typed contents and gRPC raw contents, one at a time and concurrently so that the
 * dynamic batcher puts several in one batch. Every answer must equal ONNX Runtime's on the
 * request's own rows, bit for bit, or be a 4xx that names the problem.
 *
 * Seeded and small by default. The long mode runs more requests per model and transport:
 *   DIFFERENTIAL_RUNS=200 DIFFERENTIAL_SEED=7 npx vitest run test/differential.test.ts
 * A failure prints the seed, the transport, the model and the (shrunk) request.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity, onnxElemType, serializeModel, TENSOR_DATATYPES, type GraphBuilder, type TensorDatatype } from '@batchwise/modelgen';
import {
  carries,
  configText,
  differences,
  expectedRefusal,
  onnxModel,
  pipelineAround,
  Reference,
  requestArbitrary,
  variableDims,
  type DiffRequest,
  type ModelSpec,
  type TensorSpec,
} from './support/differential.ts';
import { openTransports, type Transport, type TransportName } from './support/differential-transports.ts';
import { getJson, serveModels, type ServedModels } from './support/server.ts';

const RUNS = Number(process.env['DIFFERENTIAL_RUNS'] ?? 3);
const SEED = Number(process.env['DIFFERENTIAL_SEED'] ?? 14);
const TIMEOUT_MS = 60_000 + RUNS * 1_000;

/**
 * What A is cast to. Not from floats to integers (out of range, ONNX Runtime's answer may depend
 * on the element's position), nor FP16 to FP32 (a signaling NaN may or may not come out quiet).
 */
const CAST_TO: Partial<Record<TensorDatatype, TensorDatatype>> = {
  BOOL: 'FP16',
  UINT8: 'BYTES',
  UINT16: 'INT32',
  UINT32: 'UINT64',
  UINT64: 'INT64',
  INT8: 'INT16',
  INT16: 'FP32',
  INT32: 'INT64',
  INT64: 'BOOL',
  FP16: 'BOOL',
  FP32: 'FP64',
  FP64: 'FP32',
};

/**
 * For each datatype DT: A_DT, B_DT -> CONCAT_DT (A and B side by side), MIX_DT and CAST_DT (A as
 * CAST_TO): a server that mixed rows of different requests, or A with B, answers differently.
 * MIX is A - B; for BOOL A and not B; for BYTES PICK ? A : B; for FP16 B and A side by side,
 * because ONNX Runtime's FP16 kernels (even Where), like its FP32/FP64 Add, Mul and Max, return
 * NaN payloads that depend on where an element falls in their vector loops, so a batch would
 * differ there from its requests run alone.
 */
function pairModel(name: string, datatypes: readonly TensorDatatype[], maxBatchSize: number, dims: readonly number[]): ModelSpec {
  const last = dims.at(-1)!;
  const sideBySide = [...dims.slice(0, -1), last === -1 ? -1 : 2 * last];
  const lanes = datatypes.map((dt) => {
    const n = (kind: string) => `${kind}_${dt}`;
    const tensor = (kind: string, datatype = dt, d = dims): TensorSpec => ({ name: n(kind), datatype, dims: d });
    const castTo = CAST_TO[dt];
    return {
      inputs: [tensor('A'), tensor('B'), ...(dt === 'BYTES' ? [tensor('PICK', 'BOOL')] : [])],
      outputs: [
        tensor('CONCAT', dt, sideBySide),
        tensor('MIX', dt, dt === 'FP16' ? sideBySide : dims),
        ...(castTo ? [tensor('CAST', castTo)] : []),
      ],
      graph: (g: GraphBuilder) => {
        g.op('Concat', [n('A'), n('B')], n('CONCAT'), { axis: -1 });
        if (dt === 'BYTES') g.op('Where', [n('PICK'), n('A'), n('B')], n('MIX'));
        else if (dt === 'BOOL') g.op('And', [n('A'), g.op('Not', [n('B')], n('NOT_B'))], n('MIX'));
        else if (dt === 'FP16') g.op('Concat', [n('B'), n('A')], n('MIX'), { axis: -1 });
        else g.op('Sub', [n('A'), n('B')], n('MIX'));
        if (castTo) g.op('Cast', [n('A')], n('CAST'), { to: onnxElemType(castTo) });
      },
    };
  });
  return {
    name,
    maxBatchSize,
    inputs: lanes.flatMap((l) => l.inputs),
    outputs: lanes.flatMap((l) => l.outputs),
    graph: (g) => lanes.forEach((l) => l.graph(g)),
  };
}

/**
 * The models. Every datatype meets one dims pattern batching and another without; FP16 has
 * models of its own, as JSON and typed contents cannot carry it. Then reshapes (fixed and
 * variable dims) and scalar-like shapes.
 */
const MODELS: readonly ModelSpec[] = [
  pairModel('batching_fixed', ['BOOL', 'UINT32', 'INT16', 'BYTES'], 8, [3]),
  pairModel('batching_variable', ['UINT8', 'UINT64', 'INT32', 'FP32'], 8, [2, -1]),
  pairModel('batching_two_variable', ['UINT16', 'INT8', 'INT64', 'FP64'], 8, [-1, -1]),
  pairModel('fp16_batching', ['FP16'], 8, [-1, -1]),
  pairModel('nobatch_fixed', ['UINT16', 'INT8', 'INT64', 'FP64'], 0, [3]),
  pairModel('nobatch_variable', ['BOOL', 'UINT32', 'INT16', 'BYTES'], 0, [2, -1]),
  pairModel('nobatch_two_variable', ['UINT8', 'UINT64', 'INT32', 'FP32'], 0, [-1, -1]),
  pairModel('fp16_nobatch', ['FP16'], 0, [3]),
  {
    name: 'reshape_fixed',
    maxBatchSize: 8,
    inputs: [{ name: 'X', datatype: 'FP32', dims: [6], reshape: [2, 3] }],
    outputs: [{ name: 'Y', datatype: 'FP32', dims: [6], reshape: [3, 2] }],
    graph: (g) => g.op('Transpose', ['X'], 'Y', { perm: [0, 2, 1] }),
  },
  {
    name: 'reshape_variable',
    maxBatchSize: 8,
    inputs: [{ name: 'X', datatype: 'INT32', dims: [-1, 4], reshape: [-1, 2, 2] }],
    outputs: [{ name: 'Y', datatype: 'INT32', dims: [-1, 4], reshape: [-1, 2, 2] }],
    graph: (g) => g.op('Transpose', ['X'], 'Y', { perm: [0, 1, 3, 2] }),
  },
  {
    name: 'reshape_variable_nobatch',
    maxBatchSize: 0,
    inputs: [{ name: 'X', datatype: 'UINT16', dims: [-1, 6], reshape: [-1, 2, 3] }],
    outputs: [{ name: 'Y', datatype: 'UINT16', dims: [-1, 6], reshape: [-1, 3, 2] }],
    graph: (g) => g.op('Transpose', ['X'], 'Y', { perm: [0, 2, 1] }),
  },
  {
    name: 'scalar_batching',
    maxBatchSize: 8,
    inputs: ['A', 'B'].map((name): TensorSpec => ({ name, datatype: 'INT64', dims: [1], reshape: [] })),
    outputs: [{ name: 'SUM', datatype: 'INT64', dims: [1], reshape: [] }],
    graph: (g) => g.op('Add', ['A', 'B'], 'SUM'),
  },
  {
    name: 'scalar_nobatch',
    maxBatchSize: 0,
    inputs: [
      { name: 'X', datatype: 'FP64', dims: [1], reshape: [] },
      { name: 'S', datatype: 'BYTES', dims: [1], reshape: [] },
    ],
    outputs: [
      { name: 'NEG', datatype: 'FP64', dims: [1], reshape: [] },
      { name: 'T', datatype: 'BYTES', dims: [1], reshape: [] },
    ],
    graph: (g) => {
      g.op('Neg', ['X'], 'NEG');
      g.op('Identity', ['S'], 'T');
    },
  },
];

describe('the server answers as ONNX Runtime in-process does (differential)', () => {
  let served: ServedModels;
  let transports: ReturnType<typeof openTransports>;
  const references = new Map<string, Reference>();

  beforeAll(async () => {
    const models = MODELS.map((spec) => ({ spec, model: onnxModel(spec) }));
    served = await serveModels([
      ...models.map(({ spec, model }) => ({ name: spec.name, model, config: configText(spec) })),
      ...MODELS.flatMap(pipelineAround),
      { name: 'bf16', model: identity('BF16', [2]) },
    ]);
    transports = openTransports(served);
    for (const { spec, model } of models) {
      const reference = await Reference.create(spec, serializeModel(model));
      references.set(spec.name, reference);
      references.set(`ens_${spec.name}`, reference);
    }
  });
  afterAll(async () => {
    await transports?.close();
    await served?.close();
    await Promise.all([...new Set(references.values())].map((r) => r.release()));
  });

  /** One request's answer against the reference: equal, or a 4xx naming what ONNX Runtime cannot take. */
  async function check(spec: ModelSpec, transport: Transport, request: DiffRequest): Promise<void> {
    const outcome = await transport.infer(request);
    const refusal = expectedRefusal(request);
    const fail = (why: string): never => {
      throw new Error(`${transport.name} -> ${spec.name}: ${why}`);
    };
    if ('error' in outcome) {
      const { status, clientError, message } = outcome.error;
      if (!clientError) fail(`${status}: ${message}`);
      if (!refusal) fail(`a valid request was refused: ${status}: ${message}`);
      else if (!refusal.test(message)) fail(`refused with ${status} "${message}", which does not name ${refusal}`);
      return;
    }
    if (refusal) fail(`served a request ONNX Runtime cannot take (expected a 4xx naming ${refusal})`);
    const problems = differences(await references.get(request.model)!.run(request), outcome.outputs, transport.wire);
    if (problems.length > 0) fail(problems.join('; '));
  }

  it('covers every datatype, batching and not', () => {
    for (const batching of [true, false]) {
      const covered = new Set(MODELS.filter((m) => m.maxBatchSize > 0 === batching).flatMap((m) => m.inputs.map((t) => t.datatype)));
      expect(TENSOR_DATATYPES.filter((dt) => !covered.has(dt))).toEqual([]);
    }
  });

  it('refuses BF16, which onnxruntime-node cannot run, with a 4xx naming it', async () => {
    const request: DiffRequest = {
      model: 'bf16',
      inputs: [{ name: 'INPUT0', datatype: 'BF16', shape: [1, 2], data: Uint16Array.of(0x3f80, 0x4000) }],
    };
    for (const transport of transports.all.filter((t) => t.wire.fp16)) {
      expect(await transport.infer(request)).toEqual({
        error: expect.objectContaining({ clientError: true, message: expect.stringMatching(/BF16/) }),
      });
    }
  });

  const carrying = (spec: ModelSpec) => transports.all.filter((t) => carries(t.wire, spec));

  /**
   * Each model as it is, and behind a pipeline (`ens_<name>`: an ensemble of a JavaScript model
   * passing the inputs through, then the model), which must answer the same: tensors cross the
   * JS backend's workers and pass between ensemble steps, batched at both steps.
   */
  const VARIANTS = MODELS.flatMap((spec) => [
    { served: spec.name, spec, batchedAt: spec.name },
    { served: `ens_${spec.name}`, spec: { ...spec, name: `ens_${spec.name}` }, batchedAt: spec.name },
  ]);

  describe.each(VARIANTS.map((v) => [v.served, v] as const))('%s', (_, { spec, batchedAt }) => {
    it(
      'answers requests sent one at a time, over each transport',
      async () => {
        for (const transport of carrying(spec)) {
          const requests = variableDims(spec).chain((dims) => requestArbitrary(spec, transport.wire, dims));
          await fc.assert(
            fc.asyncProperty(requests, (request) => check(spec, transport, request)),
            { seed: SEED, numRuns: RUNS },
          );
        }
      },
      TIMEOUT_MS,
    );

    it(
      'answers concurrent requests of one shape, over mixed transports, batched together',
      async () => {
        const byName = new Map(carrying(spec).map((t) => [t.name, t]));
        const names = [...byName.keys()];
        const groups = variableDims(spec).chain((dims) =>
          fc.array(
            fc.constantFrom(...names).chain((name) => requestArbitrary(spec, byName.get(name)!.wire, dims).map((r) => [name, r] as const)),
            { minLength: 2, maxLength: 6 },
          ),
        );
        const before = await statistics(batchedAt);
        await fc.assert(
          fc.asyncProperty(groups, async (group: readonly (readonly [TransportName, DiffRequest])[]) => {
            await Promise.all(group.map(([name, request]) => check(spec, byName.get(name)!, request)));
          }),
          { seed: SEED, numRuns: RUNS },
        );
        const after = await statistics(batchedAt);
        if (spec.maxBatchSize > 0) {
          // Fewer executions than successful requests: some batch held several requests.
          expect(after.executions - before.executions).toBeLessThan(after.successes - before.successes);
        }
      },
      TIMEOUT_MS,
    );
  });

  async function statistics(model: string): Promise<{ executions: number; successes: number }> {
    const stats = (await getJson(`${served.server.url}/v2/models/${model}/stats`)).model_stats[0];
    return { executions: stats.execution_count, successes: stats.inference_stats.success.count };
  }
});
