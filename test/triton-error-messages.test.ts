/**
 * Errors in Triton's words where Triton's clients and its own tests match on them (each message
 * may say more after them), over real listening servers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, HttpClient, type InferenceClient } from '@batchwise/client';
import { identity } from '@batchwise/modelgen';
import { EXAMPLES, makeRepository } from './support/repository.ts';
import { postJson, startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const MAX_BODY_BYTES = 64 * 1024;
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
  let server: Server;
  let remove: () => Promise<void>;
  let clients: [string, InferenceClient][];
  beforeAll(async () => {
    const repo = await makeRepository([
      { name: 'simple_identity', model: identity('BYTES', [-1]), config: identityConfig('simple_identity', 'TYPE_STRING') },
      { name: 'simple_identity_int64', model: identity('INT64', [-1]), config: identityConfig('simple_identity_int64', 'TYPE_INT64') },
    ]);
    remove = repo.remove;
    server = await startTestServer([EXAMPLES, repo.dir], { maxBodyBytes: MAX_BODY_BYTES, modelControlMode: 'explicit', loadModels: ['*'] });
    clients = [
      ['http', new HttpClient({ url: server.url })],
      ['grpc', new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` })],
    ];
  });
  afterAll(async () => {
    for (const [, client] of clients) await client.close();
    await server.close();
    await remove();
  });

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

  it('an element count past the limit: "... causes total element count to exceed maximum size of ...", over HTTP and gRPC', async () => {
    // Triton's own test payload (http_test.py test_buffer_size_overflow): 2^60 + 2 is exact only as JSON text.
    const body = `{"inputs":[{"name":"INPUT0","shape":[16,1152921504606846978],"datatype":"INT64","data":[1]}]}`;
    const http = await post(`${server.url}/v2/models/simple_identity_int64/infer`, body);
    expect(http.status).toBe(400);
    expect(http.error).toContain('causes total element count to exceed maximum size of');
    for (const [label, client] of clients) {
      const message = await refusal(client, {
        model: 'simple_identity_int64',
        inputs: [{ name: 'INPUT0', datatype: 'INT64', shape: [1, 2 ** 32], data: [1n] }],
      });
      expect(message, label).toMatch(/'INPUT0'.* causes total element count to exceed maximum size of 2147483648$/);
    }
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
        const reply = await post(`${server.url}/v2/models/${model}/infer`, body);
        expect(reply.status, `${datatype} ${levels}`).toBe(ok ? 200 : 400);
        if (!ok) expect(reply.error).toContain('JSON nesting depth exceeds maximum allowed limit (100)');
      }
    }
    // Other request bodies too, whichever field holds the nesting.
    const index = await post(`${server.url}/v2/repository/index`, `{"ready":false,"x":${nested(120, '1')}}`);
    expect(index.status).toBe(400);
    expect(index.error).toBe('JSON nesting depth exceeds maximum allowed limit (100): the request is nested more than 100 levels deep');
    expect((await post(`${server.url}/v2/repository/index`, `{"ready":false,"x":${nested(99, '1')}}`)).status).toBe(200);
  });

  it('an oversized request: "Request JSON size of ... exceeds the maximum allowed value", 400, naming the flag', async () => {
    const parameters = {
      config: JSON.stringify({ max_batch_size: 0 }),
      'file:1/model.onnx': Buffer.alloc(MAX_BODY_BYTES).toString('base64'),
    };
    const body = JSON.stringify({ parameters });
    const reply = await post(`${server.url}/v2/repository/models/big/load`, body);
    expect(reply.status).toBe(400);
    expect(reply.error).toBe(
      `Request JSON size of ${body.length} bytes exceeds the maximum allowed value of ${MAX_BODY_BYTES} bytes. Use --http-max-body-bytes to increase the limit.`,
    );
    const infer = await post(`${server.url}/v2/models/simple/infer`, ' '.repeat(MAX_BODY_BYTES + 1));
    expect(infer.status).toBe(400);
    expect(infer.error).toMatch(/^Request JSON size of 65537 bytes exceeds the maximum allowed value of 65536 bytes/);
  });

  it('a repository index request whose ready is not a boolean: 400', async () => {
    for (const ready of ['"yes"', '1', 'null', '{}']) {
      const reply = await post(`${server.url}/v2/repository/index`, `{"ready":${ready}}`);
      expect(reply.status, ready).toBe(400);
      expect(reply.error).toMatch(/^Unable to parse 'ready': attempt to access JSON non-boolean as boolean/);
    }
    expect((await postJson(`${server.url}/v2/repository/index`, { ready: true })).status).toBe(200);
    expect(
      (await postJson(`${server.url}/v2/repository/models/simple/unload`, { parameters: { unload_dependents: 'no' } })).json.error,
    ).toMatch(/^Unable to parse 'unload_dependents'/);
  });
});
