import { request as httpRequest } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpClient } from '@batchwise/client';
import { identity } from '@batchwise/modelgen';
import { EXAMPLES, makeRepository } from './support/repository.ts';
import { splitBinaryResponse, startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const config = (name: string, dataType: string, dims: string, maxBatchSize: number) => `
name: "${name}"
max_batch_size: ${maxBatchSize}
input [ { name: "INPUT0" data_type: ${dataType} dims: ${dims} } ]
output [ { name: "OUTPUT0" data_type: ${dataType} dims: ${dims} } ]
`;

/** A raw binary request as Triton's own tests send it: the header 0, the body the input's bytes. */
async function postRaw(url: string, body: Uint8Array | string, headers: Record<string, string> = {}) {
  const response = await fetch(url, { method: 'POST', headers: { 'inference-header-content-length': '0', ...headers }, body });
  return { status: response.status, headers: response.headers, body: Buffer.from(await response.arrayBuffer()) };
}

const floats = (n: number) => Float32Array.from({ length: n }, (_, i) => i - 1.5);
const bytesOf = (a: Float32Array) => new Uint8Array(a.buffer);

describe('raw binary requests (binary tensor data extension, Inference-Header-Content-Length: 0), as Triton serves them', () => {
  let server: Server;
  let remove: () => Promise<void>;
  const url = (model: string) => `${server.url}/v2/models/${model}/infer`;
  beforeAll(async () => {
    const repo = await makeRepository([
      // Triton's onnx_zero_1_float32: a batching identity with one variable dimension.
      { name: 'zero_1_float32', model: identity('FP32', [-1]), config: config('zero_1_float32', 'TYPE_FP32', '[ -1 ]', 8) },
      {
        name: 'fixed_nobatch',
        model: identity('FP32', [3, -1], { batch: false }),
        config: config('fixed_nobatch', 'TYPE_FP32', '[ 3, -1 ]', 0),
      },
      { name: 'two_variable', model: identity('FP16', [-1, -1]), config: config('two_variable', 'TYPE_FP16', '[ -1, -1 ]', 8) },
      { name: 'object_1_element', model: identity('BYTES', [1]), config: config('object_1_element', 'TYPE_STRING', '[ 1 ]', 8) },
      { name: 'object', model: identity('BYTES', [-1]), config: config('object', 'TYPE_STRING', '[ -1 ]', 8) },
    ]);
    remove = repo.remove;
    server = await startTestServer([EXAMPLES, repo.dir]);
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  it('takes the body as the only input, batch dimension 1 and the variable one from the byte size; every output binary', async () => {
    for (const n of [8, 32]) {
      const input = bytesOf(floats(n));
      const reply = await postRaw(url('zero_1_float32'), input);
      expect(reply.status).toBe(200);
      expect(reply.headers.get('content-type')).toBe('application/octet-stream');
      const { json, binary } = splitBinaryResponse(reply);
      expect(json.outputs).toEqual([{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, n], parameters: { binary_data_size: 4 * n } }]);
      expect(Buffer.compare(binary, Buffer.from(input))).toBe(0);
    }
  });

  it("keeps a non-batching model's dimensions, deducing the variable one", async () => {
    const reply = await postRaw(url('fixed_nobatch'), bytesOf(floats(12)));
    expect(reply.status).toBe(200);
    expect(splitBinaryResponse(reply).json.outputs[0].shape).toEqual([3, 4]);
  });

  it('takes a BYTES body as the one element of a [1] input (the length prefix added), and a chunked body too', async () => {
    const reply = await postRaw(url('object_1_element'), '427');
    expect(reply.status).toBe(200);
    const { json, binary } = splitBinaryResponse(reply);
    expect(json.outputs[0]).toMatchObject({ datatype: 'BYTES', shape: [1, 1] });
    expect(binary.readUInt32LE(0)).toBe(3);
    expect(binary.subarray(4).toString()).toBe('427');
    const chunked = new ReadableStream({
      start(controller) {
        controller.enqueue(bytesOf(floats(4)));
        controller.enqueue(bytesOf(floats(4)));
        controller.close();
      },
    });
    const streamed = await fetch(url('zero_1_float32'), {
      method: 'POST',
      headers: { 'inference-header-content-length': '0' },
      body: chunked,
      duplex: 'half',
    } as RequestInit);
    expect(streamed.status).toBe(200);
    expect(
      splitBinaryResponse({ headers: streamed.headers, body: Buffer.from(await streamed.arrayBuffer()) }).json.outputs[0].shape,
    ).toEqual([1, 8]);
  });

  it('compresses the reply when Accept-Encoding asks for it', async () => {
    const input = bytesOf(floats(1024));
    // node:http, which leaves the body as it came (fetch decompresses it).
    const reply = await new Promise<{ headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
      const sent = httpRequest(
        url('zero_1_float32'),
        { method: 'POST', headers: { 'inference-header-content-length': '0', 'accept-encoding': 'gzip' } },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (c: Buffer) => chunks.push(c));
          response.on('end', () => resolve({ headers: response.headers, body: Buffer.concat(chunks) }));
        },
      );
      sent.on('error', reject);
      sent.end(input);
    });
    expect(reply.headers['content-encoding']).toBe('gzip');
    const decoded = gunzipSync(reply.body);
    const length = Number(reply.headers['inference-header-content-length']);
    expect(Buffer.compare(decoded.subarray(length), Buffer.from(input))).toBe(0);
  });

  it.each([
    [
      'simple',
      bytesOf(floats(32)),
      "Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'simple' model configuration",
    ],
    [
      'two_variable',
      new Uint8Array(8),
      "The shape of the raw input 'INPUT0' can not be deduced because there are more than one variable-sized dimension",
    ],
    ['object', new TextEncoder().encode('427'), "For BYTE datatype raw input 'INPUT0', the model must have input shape [1]"],
    [
      'zero_1_float32',
      new Uint8Array(10),
      "input byte size mismatch for input 'INPUT0' for model 'zero_1_float32'. Expected 8, got 10: a raw request body of 10 bytes is not a whole number of 4-byte steps of the variable dimension of [-1] FP32",
    ],
    ['fixed_nobatch', new Uint8Array(14), /^input byte size mismatch for input 'INPUT0' for model 'fixed_nobatch'. Expected 12, got 14: /],
  ])("refuses a raw request to %s in Triton's words", async (model, body, message) => {
    const reply = await postRaw(url(model), body);
    expect(reply.status).toBe(400);
    expect(JSON.parse(reply.body.toString()).error).toMatch(message);
  });

  it('is sent by @batchwise/client HttpClient.infer with { raw: true }', async () => {
    const client = new HttpClient({ url: server.url });
    try {
      const result = await client.infer(
        { model: 'zero_1_float32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 6], data: floats(6) }] },
        { raw: true },
      );
      expect(result.outputs[0]).toMatchObject({ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 6] });
      expect([...(result.outputs[0]!.data as Float32Array)]).toEqual([...floats(6)]);
      const text = await client.infer(
        { model: 'object_1_element', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1], data: ['hello'] }] },
        { raw: true },
      );
      expect(new TextDecoder().decode((text.outputs[0]!.data as Uint8Array[])[0])).toBe('hello');
    } finally {
      await client.close();
    }
  });
});
