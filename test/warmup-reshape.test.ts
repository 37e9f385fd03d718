import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpClient } from '@batchwise/client';
import { identity } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { startTestServer } from './support/server.ts';

// The ONNX model takes [batch, 4]; clients (and model_warmup samples) send [batch, 2, 2].
const CONFIG = `
name: "reshaped"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } } ]
model_warmup [
  { name: "zeros" batch_size: 2 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 2, 2 ] zero_data: true } } },
  { name: "random" batch_size: 1 count: 2 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 2, 2 ] random_data: true } } }
]`;

describe('model_warmup on a model whose input has reshape', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let client: HttpClient;
  beforeAll(async () => {
    repo = await makeRepository([{ name: 'reshaped', model: identity('FP32', [4]), config: CONFIG }]);
    server = await startTestServer([repo.dir]);
    client = new HttpClient({ url: server.url });
  });
  afterAll(async () => {
    await client?.close();
    await server?.close();
    await repo?.remove();
  });

  it('warms up with the config dims, applies the reshape as requests do, and the model serves', async () => {
    const index = await client.repositoryIndex();
    expect(index).toEqual([expect.objectContaining({ name: 'reshaped', state: 'READY' })]);
    const r = await client.infer({
      model: 'reshaped',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2, 2], data: Float32Array.of(1, 2, 3, 4) }],
    });
    expect(r.outputs[0]).toMatchObject({ name: 'OUTPUT0', shape: [1, 2, 2], data: Float32Array.of(1, 2, 3, 4) });
  });
});
