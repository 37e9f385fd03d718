/**
 * Raw binary requests (Inference-Header-Content-Length: 0) compared with the same model run
 * in-process by ONNX Runtime: the server deduces the input's shape from the body's size, and the
 * answer must equal the reference bit for bit, for a batching and a non-batching model, alone
 * and concurrently (so raw requests share batches).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serializeModel } from '@batchwise/modelgen';
import { TYPED_ARRAY_OF } from '@batchwise/protocol';
import { configText, differences, onnxModel, Reference, type ModelSpec, type TensorValue } from './support/differential.ts';
import { serveModels, splitBinaryResponse, type ServedModels } from './support/server.ts';

const SEED = Number(process.env['DIFFERENTIAL_SEED'] ?? 20261125);
const RUNS = Number(process.env['DIFFERENTIAL_RUNS'] ?? 12);
const BITS = { fp16: true, floats: 'bits', bytes: 'any' } as const;

const SPECS: readonly ModelSpec[] = [
  {
    name: 'raw_batching_fp32',
    maxBatchSize: 8,
    inputs: [{ name: 'X', datatype: 'FP32', dims: [-1] }],
    outputs: [
      { name: 'NEG', datatype: 'FP32', dims: [-1] },
      { name: 'WIDE', datatype: 'FP64', dims: [-1] },
    ],
    graph: (g) => {
      g.op('Neg', ['X'], 'NEG');
      g.op('Cast', ['X'], 'WIDE', { to: 11 });
    },
  },
  {
    name: 'raw_nobatch_int32',
    maxBatchSize: 0,
    inputs: [{ name: 'X', datatype: 'INT32', dims: [2, -1] }],
    outputs: [{ name: 'NEG', datatype: 'INT32', dims: [2, -1] }],
    graph: (g) => g.op('Neg', ['X'], 'NEG'),
  },
];

/** The shape the server deduces: the batch dimension 1, the variable one from the byte count. */
function deducedShape(spec: ModelSpec, elements: number): number[] {
  const dims = spec.inputs[0]!.dims;
  const fixed = dims.reduce((n, d) => (d === -1 ? n : n * d), 1);
  const shape = dims.map((d) => (d === -1 ? elements / fixed : d));
  return spec.maxBatchSize > 0 ? [1, ...shape] : shape;
}

describe('raw binary requests against in-process ONNX Runtime', () => {
  let served: ServedModels;
  const references = new Map<string, Reference>();
  beforeAll(async () => {
    const models = SPECS.map((spec) => ({ spec, bytes: serializeModel(onnxModel(spec)) }));
    served = await serveModels(models.map(({ spec }) => ({ name: spec.name, model: onnxModel(spec), config: configText(spec) })));
    for (const { spec, bytes } of models) references.set(spec.name, await Reference.create(spec, bytes));
  });
  afterAll(async () => {
    for (const reference of references.values()) await reference.release();
    await served?.close();
  });

  async function sendRaw(spec: ModelSpec, input: TensorValue): Promise<TensorValue[]> {
    const data = input.data as Int32Array | Float32Array;
    const response = await fetch(`${served.server.url}/v2/models/${spec.name}/infer`, {
      method: 'POST',
      headers: { 'inference-header-content-length': '0' },
      body: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
    });
    const body = Buffer.from(await response.arrayBuffer());
    if (response.status !== 200) throw new Error(`${response.status}: ${body.toString()}`);
    const { json, binary } = splitBinaryResponse({ headers: response.headers, body });
    let offset = 0;
    return json.outputs.map(
      (o: { name: string; datatype: 'FP32' | 'FP64' | 'INT32'; shape: number[]; parameters: { binary_data_size: number } }) => {
        const bytes = binary.subarray(offset, (offset += o.parameters.binary_data_size));
        return { name: o.name, datatype: o.datatype, shape: o.shape, data: new TYPED_ARRAY_OF[o.datatype](Uint8Array.from(bytes).buffer) };
      },
    );
  }

  const inputOf = (spec: ModelSpec) =>
    fc.integer({ min: 1, max: 6 }).chain((half) => {
      const count = half * 2;
      const values =
        spec.inputs[0]!.datatype === 'FP32'
          ? fc.float32Array({ minLength: count, maxLength: count })
          : fc.int32Array({ minLength: count, maxLength: count });
      return values.map((data): TensorValue => ({ name: 'X', datatype: spec.inputs[0]!.datatype, shape: deducedShape(spec, count), data }));
    });

  for (const spec of SPECS) {
    it(`${spec.name}: alone and in concurrent groups, every answer equals the reference bit for bit`, async () => {
      const reference = references.get(spec.name)!;
      await fc.assert(
        fc.asyncProperty(fc.array(inputOf(spec), { minLength: 1, maxLength: 5 }), async (inputs) => {
          const answers = await Promise.all(inputs.map((input) => sendRaw(spec, input)));
          for (let i = 0; i < inputs.length; i++) {
            const expected = await reference.run({ model: spec.name, inputs: [inputs[i]!] });
            expect(differences(expected, answers[i]!, BITS)).toEqual([]);
          }
        }),
        { seed: SEED, numRuns: RUNS },
      );
    });
  }
});
