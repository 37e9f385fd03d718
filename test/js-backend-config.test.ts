/**
 * config.pbtxt features that apply to any backend, on a JavaScript model: `reshape` (the model
 * sees the reshaped dims, the client the declared ones), `label_filename` with Triton's
 * classification extension, and the response cache (a repeated request is not executed again).
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { getJson, postJson, startTestServer } from './support/server.ts';

/** SCORES = X (the model's view [rows, 2, 2], flattened back to 4), and SHAPE = the dims it received. */
const MODEL = `
export default {
  execute(requests) {
    return requests.map((r) => {
      const x = r.inputs.X;
      return {
        outputs: [
          { name: 'SCORES', datatype: 'FP32', shape: x.shape, data: x.data },
          { name: 'SHAPE', datatype: 'INT32', shape: [x.shape[0], x.shape.length], data: Int32Array.from(Array.from({ length: x.shape[0] }, () => x.shape).flat()) },
        ],
      };
    });
  },
};
`;
const CONFIG = `name: "js_scores"
backend: "js"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]
output [
  { name: "SCORES" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } label_filename: "labels.txt" },
  { name: "SHAPE" data_type: TYPE_INT32 dims: [ 3 ] }
]
response_cache { enable: true }
`;

let dir: string;
let server: Awaited<ReturnType<typeof startTestServer>>;
const infer = (body: unknown) => postJson(`${server.url}/v2/models/js_scores/infer`, body);
const X = { name: 'X', datatype: 'FP32', shape: [1, 4], data: [0.1, 0.7, 0.05, 0.15] };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'batchwise-js-config-'));
  await mkdir(join(dir, 'js_scores', '1'), { recursive: true });
  await writeFile(join(dir, 'js_scores', 'config.pbtxt'), CONFIG);
  await writeFile(join(dir, 'js_scores', 'labels.txt'), 'cat\ndog\nbird\nfish\n');
  await writeFile(join(dir, 'js_scores', '1', 'model.mjs'), MODEL);
  server = await startTestServer([dir], { cacheConfig: ['local,size=1048576'] });
});

afterAll(async () => {
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

it('reshape: the model receives the reshaped dims, the client gets the declared ones', async () => {
  const response = await infer({ inputs: [X] });
  expect(response).toMatchObject({ status: 200 });
  const byName = Object.fromEntries(response.json.outputs.map((o: { name: string }) => [o.name, o]));
  expect(byName.SHAPE.data).toEqual([1, 2, 2]);
  expect(byName.SCORES).toMatchObject({ shape: [1, 4] });
  expect(byName.SCORES.data.map((v: number) => Math.fround(v))).toEqual(X.data.map(Math.fround));
});

it("classification: the top k of an output with label_filename, as Triton's extension gives them", async () => {
  const response = await infer({ inputs: [X], outputs: [{ name: 'SCORES', parameters: { classification: 2 } }] });
  expect(response.status).toBe(200);
  expect(response.json.outputs).toEqual([
    { name: 'SCORES', datatype: 'BYTES', shape: [1, 2], data: ['0.700000:1:dog', '0.150000:3:fish'] },
  ]);
});

it('response cache: a repeated request is answered from the cache, not executed again', async () => {
  const body = { inputs: [{ ...X, data: [0.4, 0.3, 0.2, 0.1] }] };
  const first = await infer(body);
  const stats = async () => (await getJson(`${server.url}/v2/models/js_scores/stats`)).model_stats[0];
  const before = await stats();
  const second = await infer(body);
  expect(second.json.outputs).toEqual(first.json.outputs);
  const after = await stats();
  expect(after.inference_stats.cache_hit.count - before.inference_stats.cache_hit.count).toBe(1);
  expect(after.execution_count).toBe(before.execution_count);
});
