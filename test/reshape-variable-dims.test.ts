/**
 * A reshape with variable dims, as Triton applies it: each -1 of the reshape takes, in order,
 * the size the request gives where the config dims have -1, and outputs map back the same way.
 * Requests were refused ("cannot be reshaped from [1,3,4] to [1,-1,2,2]") and warmup samples
 * failed the load; reshaped outputs reported -1 in their shape.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity } from '@batchwise/modelgen';
import { serveModels, type ServedModels } from './support/server.ts';

const BATCHING = `
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1, 4 ] reshape: { shape: [ -1, 2, 2 ] } } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1, 4 ] reshape: { shape: [ -1, 2, 2 ] } } ]
model_warmup [ { name: "zeros" batch_size: 2 inputs { key: "INPUT0" value: { data_type: TYPE_INT32 dims: [ 3, 4 ] zero_data: true } } } ]`;
const NOT_BATCHING = `
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_UINT16 dims: [ -1, 6 ] reshape: { shape: [ -1, 2, 3 ] } } ]
output [ { name: "OUTPUT0" data_type: TYPE_UINT16 dims: [ -1, 6 ] reshape: { shape: [ -1, 2, 3 ] } } ]`;

describe('reshape with variable dims', () => {
  let served: ServedModels;
  beforeAll(async () => {
    served = await serveModels([
      { name: 'batching', model: identity('INT32', [-1, 2, 2]), config: BATCHING },
      { name: 'not_batching', model: identity('UINT16', [-1, 2, 3], { batch: false }), config: NOT_BATCHING },
    ]);
  });
  afterAll(() => served?.close());

  it('loads both models, warmup samples included', async () => {
    expect(await served.client.repositoryIndex()).toEqual([
      expect.objectContaining({ name: 'batching', state: 'READY' }),
      expect.objectContaining({ name: 'not_batching', state: 'READY' }),
    ]);
  });

  it('fills the variable dims of input and output reshapes from the request (batching)', async () => {
    const data = Int32Array.from({ length: 24 }, (_, i) => i - 5);
    const r = await served.client.infer({ model: 'batching', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [2, 3, 4], data }] });
    expect(r.outputs[0]).toMatchObject({ name: 'OUTPUT0', shape: [2, 3, 4], data });
  });

  it('fills the variable dims of input and output reshapes from the request (no batching)', async () => {
    const data = Uint16Array.from({ length: 30 }, (_, i) => i * 1000);
    const r = await served.client.infer({ model: 'not_batching', inputs: [{ name: 'INPUT0', datatype: 'UINT16', shape: [5, 6], data }] });
    expect(r.outputs[0]).toMatchObject({ name: 'OUTPUT0', shape: [5, 6], data });
  });
});
