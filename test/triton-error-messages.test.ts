/**
 * Errors in Triton's words where Triton's clients and its own tests match on them (each message
 * may say more after them), over a real server: the compiled CLI started with Triton's flags.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchwiseClientError, GrpcClient, GrpcStatus, HttpClient, type InferenceClient } from '@batchwise/client';
import { identity } from '@batchwise/modelgen';
import { startServerProcess, type ServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { EXAMPLES, makeRepository } from './support/repository.ts';
import { postJson } from './support/server.ts';

/** The body limit, given by Triton's name for it: room for Triton's 250000-deep index request (500 kB), not for a 512 KiB file. */
const MAX_INPUT_SIZE = 512 * 1024;
const identityConfig = (name: string, dataType: string) => `
name: "${name}"
max_batch_size: 8
input [ { name: "INPUT0" data_type: ${dataType} dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: ${dataType} dims: [ -1 ] } ]
`;

async function post(url: string, body: string) {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return { status: response.status, error: ((await response.json()) as { error?: string }).error ?? '' };
}

const nested = (levels: number, value: string) => `${'['.repeat(levels)}${value}${']'.repeat(levels)}`;

describe("errors in Triton's words", () => {
  let server: ServerProcess;
  let url: string;
  let remove: () => Promise<void>;
  let clients: [string, InferenceClient][];
  beforeAll(async () => {
    // simple_identity (strings) is the example repository's, Triton's own Python model.
    const repo = await makeRepository([
      { name: 'simple_identity_int64', model: identity('INT64', [-1]), config: identityConfig('simple_identity_int64', 'TYPE_INT64') },
      { name: 'onnx_zero_1_float32', model: identity('FP32', [-1]), config: identityConfig('onnx_zero_1_float32', 'TYPE_FP32') },
    ]);
    remove = repo.remove;
    server = await startServerProcess([
      ...['--model-repository', EXAMPLES, '--model-repository', repo.dir],
      ...['--model-control-mode', 'explicit', '--load-model', '*'],
      ...['--http-max-input-size', String(MAX_INPUT_SIZE)],
    ]);
    url = server.httpUrl;
    clients = [
      ['http', new HttpClient({ url })],
      ['grpc', new GrpcClient({ url: server.grpcAddress })],
    ];
  });
  afterAll(async () => {
    for (const [, client] of clients ?? []) await client.close();
    await server?.stop();
    await remove?.();
  });
  const isLive = async () => (await fetch(`${url}/v2/health/live`)).status === 200;

  const row = Array.from({ length: 16 }, (_, i) => i);
  const simpleInputs = ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32' as const, shape: [1, 16], data: row }));
  const refusal = (client: InferenceClient, request: Parameters<InferenceClient['infer']>[0]) =>
    client.infer(request).then(
      () => '',
      (error: Error) => error.message,
    );

  it('a requested output, or an input, given twice: "... already exists in request", over HTTP and gRPC', async () => {
    for (const [label, client] of clients) {
      expect(await refusal(client, { model: 'simple', inputs: simpleInputs, outputs: ['OUTPUT0', 'OUTPUT1', 'OUTPUT0'] }), label).toBe(
        "output 'OUTPUT0' already exists in request for model 'simple'",
      );
      expect(await refusal(client, { model: 'simple', inputs: [...simpleInputs, simpleInputs[0]!] }), label).toBe(
        "input 'INPUT0' already exists in request for model 'simple'",
      );
    }
  });

  it("Triton's test_buffer_size_overflow: an element count, then a byte size, past INT64_MAX, over HTTP and gRPC", async () => {
    // Triton's own payloads (qa/L0_http/http_test.py): 2^60 + 2 is exact only as JSON text.
    const body = (shape: string) => `{"inputs":[{"name":"INPUT0","shape":${shape},"datatype":"FP32","data":[1.0]}]}`;
    const elements = await post(`${url}/v2/models/onnx_zero_1_float32/infer`, body('[16,1152921504606846978]'));
    expect(elements.status).toBe(400);
    expect(elements.error).toContain('causes total element count to exceed maximum size of');
    expect(elements.error).toBe(
      "invalid shape for input 'INPUT0': shape [16,1152921504606846978] causes total element count to exceed maximum size of 9223372036854775807",
    );
    const bytes = await post(`${url}/v2/models/onnx_zero_1_float32/infer`, body('[4,1152921504606846978]'));
    expect(bytes.status).toBe(400);
    expect(bytes.error).toContain('byte size overflow for input');
    expect(bytes.error).toBe(
      "byte size overflow for input 'INPUT0': element count (4611686018427387912) * data type size (4) exceeds maximum allowed size (9223372036854775807)",
    );
    // The same checks over both protocols, through the clients (2^60 is exact as a number); within INT64_MAX, our own limit.
    const fp32 = (shape: number[]) => ({
      model: 'onnx_zero_1_float32',
      inputs: [{ name: 'INPUT0', datatype: 'FP32' as const, shape, data: [1] }],
    });
    for (const [label, client] of clients) {
      expect(await refusal(client, fp32([16, 2 ** 60])), label).toMatch(
        /^invalid shape for input 'INPUT0': shape \[16,\d+\] causes total element count to exceed maximum size of 9223372036854775807$/,
      );
      expect(await refusal(client, fp32([4, 2 ** 60])), label).toMatch(
        /^byte size overflow for input 'INPUT0': element count \(\d+\) \* data type size \(4\) exceeds maximum allowed size \(9223372036854775807\)$/,
      );
      expect(await refusal(client, fp32([1, 2 ** 32])), label).toBe(
        "shape [1,4294967296] of tensor 'INPUT0' has more elements than the 2147483648 one tensor may have",
      );
    }
    expect(await isLive()).toBe(true);
  });

  it("Triton's test_negative_dimensions: 500 over HTTP, as Triton's JSON reader fails; INVALID_ARGUMENT over gRPC, as core Triton", async () => {
    const payload = `{"inputs":[{"name":"INPUT0","shape":[2,-5],"datatype":"FP32","data":[1.0]}]}`;
    const reply = await post(`${url}/v2/models/onnx_zero_1_float32/infer`, payload);
    expect(reply.status).toBe(500);
    expect(reply.error).toContain("Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer");
    expect(reply.error).toBe(
      "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer: dimension 1 of input 'INPUT0' is -5",
    );
    const negative = { model: 'onnx_zero_1_float32', inputs: [{ name: 'INPUT0', datatype: 'FP32' as const, shape: [2, -5], data: [1] }] };
    const grpc = await (clients[1]![1].infer(negative).catch((e: unknown) => e) as Promise<unknown>);
    expect(grpc).toBeInstanceOf(BatchwiseClientError);
    expect((grpc as BatchwiseClientError).grpcCode).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect((grpc as BatchwiseClientError).message).toBe("tensor 'INPUT0' contains an invalid dimension [2,-5]");
    expect(await isLive()).toBe(true);
    expect((await fetch(`${url}/v2/health/ready`)).status).toBe(200);
  });

  it('JSON nested past 100 levels: "JSON nesting depth exceeds maximum allowed limit (100)", as Triton\'s test matrix has it', async () => {
    for (const [datatype, value, model] of [
      ['BYTES', '"hello"', 'simple_identity'],
      ['INT64', '123', 'simple_identity_int64'],
    ] as const) {
      for (const [levels, ok] of [
        [120, false],
        [50, true],
      ] as const) {
        const body = `{"inputs":[{"name":"INPUT0","datatype":"${datatype}","shape":[1,1],"data":${nested(levels, value)}}]}`;
        const reply = await post(`${url}/v2/models/${model}/infer`, body);
        expect(reply.status, `${datatype} ${levels}`).toBe(ok ? 200 : 400);
        if (!ok) expect(reply.error).toContain('JSON nesting depth exceeds maximum allowed limit (100)');
      }
    }
    // Other request bodies too, whichever field holds the nesting.
    const index = await post(`${url}/v2/repository/index`, `{"ready":false,"x":${nested(120, '1')}}`);
    expect(index.status).toBe(400);
    expect(index.error).toBe('JSON nesting depth exceeds maximum allowed limit (100): the request is nested more than 100 levels deep');
    expect((await post(`${url}/v2/repository/index`, `{"ready":false,"x":${nested(99, '1')}}`)).status).toBe(200);
  });

  it("Triton's test_loading_large_invalid_model: a body over --http-max-input-size, 400 in Triton's words naming the flag", async () => {
    const parameters = {
      config: JSON.stringify({ backend: 'onnxruntime' }),
      'file:1/model.onnx': Buffer.alloc(MAX_INPUT_SIZE).toString('base64'),
    };
    const body = JSON.stringify({ parameters });
    const reply = await post(`${url}/v2/repository/models/invalid_onnx/load`, body);
    expect(reply.status).toBe(400);
    expect(reply.error).toContain('request JSON size');
    expect(reply.error).toContain(' exceeds the maximum allowed input size');
    expect(reply.error).toBe(
      `request JSON size of ${body.length} bytes exceeds the maximum allowed input size of ${MAX_INPUT_SIZE} bytes. Use --http-max-input-size to increase the limit.`,
    );
    const infer = await post(`${url}/v2/models/simple/infer`, ' '.repeat(MAX_INPUT_SIZE + 1));
    expect(infer.status).toBe(400);
    expect(infer.error).toBe(
      `request JSON size of ${MAX_INPUT_SIZE + 1} bytes exceeds the maximum allowed input size of ${MAX_INPUT_SIZE} bytes. Use --http-max-input-size to increase the limit.`,
    );
    expect(await isLive()).toBe(true);
  });

  it("Triton's test_repository_index_deeply_nested_json: a ready that is not a boolean, however deep, is 400 before any nesting limit", async () => {
    const deep = `{"ready":${nested(250_000, 'true')}}`;
    expect(deep.length).toBeLessThan(MAX_INPUT_SIZE);
    const reply = await post(`${url}/v2/repository/index`, deep);
    expect(reply.status).toBe(400);
    expect(reply.error).toContain("Invalid value for 'ready': expected a boolean");
    expect(await isLive()).toBe(true);
    for (const ready of ['"yes"', '1', 'null', '{}', '[true]']) {
      const shallow = await post(`${url}/v2/repository/index`, `{"ready":${ready}}`);
      expect(shallow.status, ready).toBe(400);
      expect(shallow.error).toMatch(/^Invalid value for 'ready': expected a boolean, got /);
    }
    expect((await postJson(`${url}/v2/repository/index`, { ready: true })).status).toBe(200);
    expect((await postJson(`${url}/v2/repository/models/simple/unload`, { parameters: { unload_dependents: 'no' } })).json.error).toMatch(
      /^Unable to parse 'unload_dependents'/,
    );
  });
});
