import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLES } from './support/repository.ts';
import { isReady, postBinary, postJson, startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const row = (n = 16) => Array.from({ length: n }, (_, i) => i);
const good = (overrides: Record<string, unknown> = {}) => ({
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: row() },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: row(), ...overrides },
  ],
});

describe('bad input gets a 400 naming the problem, and the server stays ready', () => {
  let server: Server;
  let infer: string;
  beforeAll(async () => {
    server = await startTestServer([EXAMPLES]);
    infer = `${server.url}/v2/models/simple/infer`;
  });
  afterAll(() => server.close());

  const cases: [string, () => Promise<{ status: number; json: any }>, number, RegExp][] = [
    ['malformed JSON', () => postJson(infer, '{"inputs": [ {"name": '), 400, /JSON/i],
    ['a body that is not an object', () => postJson(infer, '[1,2,3]'), 400, /object/i],
    ['wrong shape', () => postJson(infer, good({ shape: [1, 15], data: row(15) })), 400, /INPUT1/],
    ['wrong datatype', () => postJson(infer, good({ datatype: 'FP32' })), 400, /INPUT1.*FP32|FP32.*INPUT1/],
    ['data shorter than the shape', () => postJson(infer, good({ data: row(15) })), 400, /INPUT1/],
    ['data longer than the shape', () => postJson(infer, good({ data: row(17) })), 400, /INPUT1/],
    ['an unknown datatype', () => postJson(infer, good({ datatype: 'INT33' })), 400, /INT33/],
    [
      'an input the model does not have',
      () => postJson(infer, { inputs: [...good().inputs, { name: 'EXTRA', datatype: 'INT32', shape: [1, 16], data: row() }] }),
      400,
      /EXTRA/,
    ],
    ['a missing input', () => postJson(infer, { inputs: [good().inputs[0]] }), 400, /INPUT1/],
    [
      'a batch larger than max_batch_size',
      () =>
        postJson(infer, {
          inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [9, 16], data: row(144) })),
        }),
      400,
      /batch-size must be <= 8/,
    ],
    ['an unknown output', () => postJson(infer, { ...good(), outputs: [{ name: 'NOPE' }] }), 400, /NOPE/],
    ['an unknown model', () => postJson(`${server.url}/v2/models/nope/infer`, good()), 400, /unknown model: 'nope'/],
    ['an unknown version', () => postJson(`${server.url}/v2/models/simple/versions/9/infer`, good()), 404, /version 9/],
    [
      'an unknown model, whatever the body',
      () => postJson(`${server.url}/v2/models/nope/infer`, {}),
      400,
      /^Request for unknown model: 'nope' is not found$/,
    ],
    [
      'an unknown model with a body that is not JSON',
      () => postJson(`${server.url}/v2/models/nope/infer`, '{"inp'),
      400,
      /unknown model: 'nope'/,
    ],
    ['an unknown version, whatever the body', () => postJson(`${server.url}/v2/models/simple/versions/9/infer`, {}), 404, /version 9/],
    [
      'a batch of 0',
      () =>
        postJson(infer, {
          inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [0, 16], data: [] })),
        }),
      400,
      /batch-size must be >= 1 for 'simple', got 0/,
    ],
    [
      'a header length larger than the body',
      () => postBinary(infer, good(), [], '100000').then((r) => ({ status: r.status, json: JSON.parse(r.body.toString()) })),
      400,
      /Inference-Header-Content-Length/i,
    ],
    [
      'binary_data_size that disagrees with the shape',
      () =>
        postBinary(
          infer,
          {
            inputs: [
              { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 60 } },
              { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: row() },
            ],
          },
          [new Uint8Array(60)],
        ).then((r) => ({ status: r.status, json: JSON.parse(r.body.toString()) })),
      400,
      /INPUT0/,
    ],
  ];

  for (const [what, send, status, message] of cases) {
    it(what, async () => {
      const response = await send();
      expect(response.status).toBe(status);
      expect(response.json.error).toMatch(message);
      expect(await isReady(server.url)).toBe(true);
    });
  }

  it('the model still answers correctly after all that', async () => {
    const { status, json } = await postJson(infer, good());
    expect(status).toBe(200);
    expect(json.outputs[0].data).toEqual(row().map((x) => 2 * x));
  });

  it('answers unknown routes with a JSON 404', async () => {
    const response = await fetch(`${server.url}/v3/nothing`);
    expect(response.status).toBe(404);
    expect(((await response.json()) as { error: unknown }).error).toBeTypeOf('string');
  });

  it('counts failed requests in the failure metric', async () => {
    const text = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
    expect(text).toMatch(/nv_inference_request_failure\{model="simple",reason="OTHER",version="1"\} [1-9]/);
  });
});
