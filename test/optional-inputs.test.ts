/**
 * `optional: true` on an input, with ONNX Runtime for Node.js: it runs a graph only with every
 * input the session lists, and it does not list (nor let a request override) inputs that have
 * an initializer. So an input the config calls optional but the model requires is refused when
 * left out, naming it (it reached ONNX Runtime and came back 500 "input 'C' is missing in
 * 'feeds'"), and an initializer-backed input cannot be configured at all.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchwiseClientError } from '@batchwise/client';
import { GraphBuilder } from '@batchwise/modelgen';
import { serveModels, type ServedModels } from './support/server.ts';

function addModel(initializer: boolean) {
  const g = new GraphBuilder('add');
  g.input('A', 'FP32', ['batch', 2]);
  g.input('C', 'FP32', ['batch', 2]);
  if (initializer) g.initializer('C', 'FP32', [1, 2], Float32Array.of(1, 2));
  g.op('Add', ['A', 'C'], 'Y');
  g.output('Y', 'FP32', ['batch', 2]);
  return g.build();
}

const config = (name: string) => `name: "${name}" max_batch_size: 4
input [ { name: "A" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "C" data_type: TYPE_FP32 dims: [ 2 ] optional: true } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]`;

describe('optional inputs', () => {
  let served: ServedModels;
  beforeAll(async () => {
    served = await serveModels([
      { name: 'required', model: addModel(false), config: config('required') },
      { name: 'initializer', model: addModel(true), config: config('initializer') },
    ]);
  });
  afterAll(() => served?.close());

  const a = { name: 'A', datatype: 'FP32', shape: [1, 2], data: Float32Array.of(1, 1) } as const;

  it('refuses a request leaving out an input the model requires, naming it, and serves it when sent', async () => {
    const refused = await served.client.infer({ model: 'required', inputs: [a] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(BatchwiseClientError);
    expect(refused).toMatchObject({ httpStatus: 400, message: expect.stringContaining("missing 'C'") });
    const r = await served.client.infer({
      model: 'required',
      inputs: [a, { name: 'C', datatype: 'FP32', shape: [1, 2], data: Float32Array.of(10, 20) }],
    });
    expect(r.outputs[0]!.data).toEqual(Float32Array.of(11, 21));
  });

  it('cannot configure an input backed by an initializer: the load fails naming it', async () => {
    const entry = (await served.client.repositoryIndex()).find((m) => m.name === 'initializer');
    expect(entry).toMatchObject({
      state: 'UNAVAILABLE',
      reason: expect.stringContaining("input 'C' in the config is not an input of the model"),
    });
  });
});
