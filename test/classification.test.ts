/**
 * Triton's classification extension end to end, as Triton's image_client asks for it
 * (`InferRequestedOutput(name, class_count=k)`): top-k "value:index:label" strings, labels
 * from the output's label_filename, over HTTP (JSON and binary) and gRPC.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { postBinary, postJson, splitBinaryResponse, startTestServer } from './support/server.ts';
import { describeWithTritonProtocol, status, unaryCall, upstreamClients, type AnyClient } from './support/upstream-grpc.ts';

const CONFIG = `
name: "classifier"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 5 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 5 ] label_filename: "labels.txt" } ]
`;
const LABELS = 'cat\ndog\nbird\nfish\nfrog\n';
const SCORES = [
  [0.1, 0.6, 0.05, 0.2, 0.05],
  [0.9, 0.01, 0.02, 0.03, 0.04],
];
const TOP2 = [
  ['0.600000:1:dog', '0.200000:3:fish'],
  ['0.900000:0:cat', '0.040000:4:frog'],
];
const bytesOf = (view: ArrayBufferView) => Buffer.from(view.buffer, view.byteOffset, view.byteLength);

/** The KServe binary BYTES serialization: 4-byte little-endian length, then the bytes. */
function bytesElements(data: Buffer): string[] {
  const out: string[] = [];
  for (let at = 0; at < data.length;) {
    const length = data.readUInt32LE(at);
    out.push(data.subarray(at + 4, at + 4 + length).toString());
    at += 4 + length;
  }
  return out;
}

describe('classification extension', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  beforeAll(async () => {
    repo = await makeRepository([
      { name: 'classifier', model: identity('FP32', [5]), config: CONFIG, files: { 'labels.txt': LABELS } },
      {
        name: 'escaping_labels',
        model: identity('FP32', [5]),
        config: CONFIG.replace('classifier', 'escaping_labels').replace('labels.txt', '../labels.txt'),
      },
    ]);
    server = await startTestServer([repo.dir]);
  });
  afterAll(async () => {
    await server?.close();
    await repo?.remove();
  });

  const input = { name: 'INPUT0', datatype: 'FP32', shape: [2, 5], data: SCORES.flat() };

  it('HTTP JSON: top k per batch item as BYTES strings with labels', async () => {
    const response = await postJson(`${server.url}/v2/models/classifier/infer`, {
      inputs: [input],
      outputs: [{ name: 'OUTPUT0', parameters: { classification: 2 } }],
    });
    expect(response.status).toBe(200);
    expect(response.json.outputs).toEqual([{ name: 'OUTPUT0', datatype: 'BYTES', shape: [2, 2], data: TOP2.flat() }]);
  });

  it('HTTP binary, as the Python client sends it (binary_data true), and k clamped to the classes', async () => {
    const response = await postBinary(
      `${server.url}/v2/models/classifier/infer`,
      {
        inputs: [{ ...input, data: undefined, parameters: { binary_data_size: 40 } }],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true, classification: 9 } }],
      },
      [bytesOf(Float32Array.from(SCORES.flat()))],
    );
    expect(response.status).toBe(200);
    const { json, binary } = splitBinaryResponse(response);
    expect(json.outputs[0]).toMatchObject({ name: 'OUTPUT0', datatype: 'BYTES', shape: [2, 5] });
    const elements = bytesElements(binary);
    expect(elements.slice(0, 5)).toEqual(['0.600000:1:dog', '0.200000:3:fish', '0.100000:0:cat', '0.050000:2:bird', '0.050000:4:frog']);
  });

  it('refuses a count that is not a positive integer, and the server keeps serving', async () => {
    const bad = await postJson(`${server.url}/v2/models/classifier/infer`, {
      inputs: [input],
      outputs: [{ name: 'OUTPUT0', parameters: { classification: 0 } }],
    });
    expect(bad).toMatchObject({
      status: 400,
      json: { error: expect.stringContaining("classification of output 'OUTPUT0' must be a positive integer") },
    });
    const plain = await postJson(`${server.url}/v2/models/classifier/infer`, { inputs: [input] });
    expect(plain.json.outputs[0].data[1]).toBeCloseTo(0.6);
  });

  it('a label_filename outside the model folder fails that model only', async () => {
    const index = await postJson(`${server.url}/v2/repository/index`, {});
    const entry = index.json.find((m: { name: string }) => m.name === 'escaping_labels');
    expect(entry).toMatchObject({
      state: 'UNAVAILABLE',
      reason: expect.stringContaining("label_filename of output 'OUTPUT0' '../labels.txt' must name a file inside"),
    });
    expect(index.json.find((m: { name: string }) => m.name === 'classifier')).toMatchObject({ state: 'READY' });
  });

  describeWithTritonProtocol('gRPC', () => {
    let inference: AnyClient;
    beforeAll(() => {
      ({ inference } = upstreamClients(`127.0.0.1:${server.grpcPort}`));
    });
    afterAll(() => inference?.close());

    it('classification as an int64 output parameter, strings in raw_output_contents', async () => {
      const response = await unaryCall(inference, 'ModelInfer', {
        model_name: 'classifier',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2, 5] }],
        raw_input_contents: [bytesOf(Float32Array.from(SCORES.flat()))],
        outputs: [{ name: 'OUTPUT0', parameters: { classification: { int64_param: 2 } } }],
      });
      expect(response.outputs[0]).toMatchObject({ name: 'OUTPUT0', datatype: 'BYTES', shape: ['2', '2'] });
      expect(bytesElements(response.raw_output_contents[0])).toEqual(TOP2.flat());
      await expect(
        unaryCall(inference, 'ModelInfer', {
          model_name: 'classifier',
          inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2, 5] }],
          raw_input_contents: [bytesOf(Float32Array.from(SCORES.flat()))],
          outputs: [{ name: 'OUTPUT0', parameters: { classification: { string_param: 'two' } } }],
        }),
      ).rejects.toMatchObject({ code: status.INVALID_ARGUMENT });
    });
  });
});
