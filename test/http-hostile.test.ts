import { connect } from 'node:net';
import { request as httpRequest } from 'node:http';
import { gunzipSync, gzipSync, inflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity } from '@batchwise/modelgen';
import { EXAMPLES, makeRepository } from './support/repository.ts';
import { isReady, postBinary, startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const row = Array.from({ length: 16 }, (_, i) => i);
const simpleBody = (input1: Record<string, unknown> = {}) =>
  JSON.stringify({
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: row },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: row, ...input1 },
    ],
  });

async function send(url: string, body: string | Buffer, headers: Record<string, string> = {}) {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await response.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = { raw: text };
  }
  return { status: response.status, json };
}

describe('hostile input over HTTP: a 4xx naming the problem, and the server stays ready', () => {
  let server: Server;
  let remove: () => Promise<void>;
  let simple: string;
  let bytesModel: string;
  beforeAll(async () => {
    const repo = await makeRepository([{ name: 'id_bytes', model: identity('BYTES', [2]) }]);
    remove = repo.remove;
    server = await startTestServer([EXAMPLES, repo.dir], { maxBodyBytes: 1024 * 1024, requestTimeoutMs: 1500 });
    simple = `${server.url}/v2/models/simple/infer`;
    bytesModel = `${server.url}/v2/models/id_bytes/infer`;
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  const cases: [string, () => Promise<{ status: number; json: any }>, number, RegExp][] = [
    ['truncated JSON', () => send(simple, simpleBody().slice(0, 40)), 400, /JSON/],
    ['JSON nested thousands deep', () => send(simple, `{"inputs": ${'['.repeat(5000)}${']'.repeat(5000)}}`), 400, /./],
    [
      'data nested thousands deep',
      () => send(simple, simpleBody({ data: JSON.parse(`${'['.repeat(3000)}1${']'.repeat(3000)}`) })),
      400,
      /INPUT1/,
    ],
    ['a negative header length', () => postBinary(simple, {}, [], '-5').then(asJson), 400, /Inference-Header-Content-Length/],
    ['a header length that is not a number', () => postBinary(simple, {}, [], 'ten').then(asJson), 400, /Inference-Header-Content-Length/],
    [
      'BYTES length prefixes that run past the end',
      () =>
        postBinary(bytesModel, { inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 2], parameters: { binary_data_size: 9 } }] }, [
          Uint8Array.from([1, 0, 0, 0, 0x61, 200, 0, 0, 0]),
        ]).then(asJson),
      400,
      /INPUT0/,
    ],
    // Triton's JSON reader fails on a negative dimension and answers 500 (docs/triton-compatibility.md).
    ['a negative dimension', () => send(simple, simpleBody({ shape: [1, -16] })), 500, /^Unable to parse 'shape': .*'INPUT1' is -16$/],
    ['a huge dimension', () => send(simple, simpleBody({ shape: [1, 2 ** 52] })), 400, /INPUT1/],
    [
      'an element count whose byte size overflows',
      () => send(simple, simpleBody({ shape: [65536, 65536, 65536], parameters: { binary_data_size: 4 }, data: undefined })),
      400,
      /INPUT1/,
    ],
    ['FP16 in JSON', () => send(simple, simpleBody({ datatype: 'FP16' })), 400, /FP16/],
    ['an unknown datatype', () => send(simple, simpleBody({ datatype: 'COMPLEX64' })), 400, /COMPLEX64/],
    [
      'duplicate input names',
      () => send(simple, JSON.stringify({ inputs: [JSON.parse(simpleBody()).inputs[0], JSON.parse(simpleBody()).inputs[0]] })),
      400,
      /INPUT0/,
    ],
    [
      'duplicate output names',
      () => send(simple, JSON.stringify({ ...JSON.parse(simpleBody()), outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT0' }] })),
      400,
      /OUTPUT0/,
    ],
    [
      'a body over the limit',
      () => send(simple, Buffer.alloc(2 * 1024 * 1024, 0x20)),
      400,
      /^request JSON size of 2097152 bytes exceeds the maximum allowed input size of 1048576 bytes/,
    ],
    ['an unsupported content encoding', () => send(simple, simpleBody(), { 'content-encoding': 'br' }), 415, /Content-Encoding 'br'/],
    ['a corrupt gzip body', () => send(simple, Buffer.from('not gzip'), { 'content-encoding': 'gzip' }), 400, /decompress/],
  ];

  for (const [what, run, status, message] of cases) {
    it(what, async () => {
      const { status: got, json } = await run();
      expect(got, JSON.stringify(json)).toBe(status);
      expect(json.error).toMatch(message);
      expect(await isReady(server.url)).toBe(true);
    });
  }

  it('accepts a gzip-compressed body, as Triton clients send it', async () => {
    const { status, json } = await send(simple, gzipSync(simpleBody()), { 'content-encoding': 'gzip' });
    expect(status).toBe(200);
    expect(json.outputs[0].data).toEqual(row.map((x) => 2 * x));
  });

  it('compresses inference replies over 1 KiB in the encoding Accept-Encoding asks for, and nothing else, as Triton does', async () => {
    const binaryBody = (values: number[]) => {
      const header = Buffer.from(
        JSON.stringify({
          inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } })),
          parameters: { binary_data_output: true },
        }),
      );
      const tensor = Buffer.from(Int32Array.from(values).buffer);
      return { header, body: Buffer.concat([header, tensor, tensor]) };
    };
    const raw = (path: string, init: { method?: string; headers?: Record<string, string>; body?: Buffer } = {}) =>
      new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
        const request = httpRequest(`${server.url}${path}`, { method: init.method ?? 'GET', headers: init.headers ?? {} }, (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (c: Buffer) => chunks.push(c));
          response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body: Buffer.concat(chunks) }));
        });
        request.on('error', reject);
        request.end(init.body);
      });
    // A binary reply over the threshold: Inference-Header-Content-Length counts the decoded bytes.
    const floats = Float32Array.from({ length: 512 }, (_, i) => i / 8);
    const identityHeader = Buffer.from(
      JSON.stringify({
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 512], parameters: { binary_data_size: 2048 } }],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
      }),
    );
    const compressed = await raw('/v2/models/identity_fp32/infer', {
      method: 'POST',
      headers: {
        'accept-encoding': 'gzip',
        'content-type': 'application/octet-stream',
        'inference-header-content-length': String(identityHeader.length),
      },
      body: Buffer.concat([identityHeader, Buffer.from(floats.buffer)]),
    });
    expect(compressed.headers['content-encoding']).toBe('gzip');
    const decoded = gunzipSync(compressed.body);
    const jsonLength = Number(compressed.headers['inference-header-content-length']);
    expect(JSON.parse(decoded.subarray(0, jsonLength).toString()).outputs[0].parameters).toEqual({ binary_data_size: 2048 });
    expect(new Float32Array(decoded.buffer.slice(decoded.byteOffset + jsonLength, decoded.byteOffset + decoded.length))).toEqual(floats);

    const values = Array.from({ length: 16 }, () => 7);
    const { header, body } = binaryBody(values);
    for (const [encoding, decode] of [
      ['gzip', gunzipSync],
      ['deflate', inflateSync],
    ] as const) {
      const inferred = await raw('/v2/models/identity_fp32/infer', {
        method: 'POST',
        headers: {
          'accept-encoding': `identity;q=0.5, ${encoding}`,
          'content-type': 'application/octet-stream',
          'inference-header-content-length': String(identityHeader.length),
        },
        body: Buffer.concat([identityHeader, Buffer.from(floats.buffer)]),
      });
      expect(inferred.headers['content-encoding']).toBe(encoding);
      expect(decode(inferred.body).length).toBe(Number(inferred.headers['inference-header-content-length']) + 2048);
      // Config, statistics, metadata and repository replies never are (Triton's asyncio client
      // advertises gzip and does not decompress them); every model's statistics are over 1 KiB.
      for (const [method, path] of [
        ['GET', '/v2/models/stats'],
        ['GET', '/v2/models/simple/config'],
        ['GET', '/v2/models/simple'],
        ['POST', '/v2/repository/index'],
      ] as const) {
        const reply = await raw(path, { method, headers: { 'accept-encoding': encoding } });
        expect(reply.status, path).toBe(200);
        expect(reply.headers['content-encoding'], path).toBeUndefined();
        expect(JSON.parse(reply.body.toString()), path).toBeTruthy();
      }
      expect((await raw('/v2/models/stats', { headers: { 'accept-encoding': encoding } })).body.length).toBeGreaterThan(1024);
      expect((await raw('/v2/models/simple/config', { headers: { 'accept-encoding': encoding } })).body.length).toBeGreaterThan(1024);
      // 4 outputs of 64 bytes each are below it: sent as they are.
      const small = await raw('/v2/models/simple/infer', {
        method: 'POST',
        headers: {
          'accept-encoding': encoding,
          'content-type': 'application/octet-stream',
          'inference-header-content-length': String(header.length),
        },
        body,
      });
      expect(small.status).toBe(200);
      expect(small.headers['content-encoding']).toBeUndefined();
    }
    // gzip;q=0 refuses gzip; an encoding Triton does not speak is not chosen.
    for (const accept of ['gzip;q=0', 'br', 'identity']) {
      const plain = await raw('/v2/models/identity_fp32/infer', {
        method: 'POST',
        headers: {
          'accept-encoding': accept,
          'content-type': 'application/octet-stream',
          'inference-header-content-length': String(identityHeader.length),
        },
        body: Buffer.concat([identityHeader, Buffer.from(floats.buffer)]),
      });
      expect(plain.status).toBe(200);
      expect(plain.headers['content-encoding'], accept).toBeUndefined();
    }
  });

  it('cuts off a slow client that never finishes its body', async () => {
    const started = Date.now();
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(server.httpPort, '127.0.0.1', () => {
        socket.write(
          `POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"inputs":`,
        );
      });
      let data = '';
      socket.on('data', (d) => (data += d));
      socket.on('close', () => resolve(data));
      socket.on('error', () => resolve(data));
    });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(answer === '' || /^HTTP\/1.1 408/.test(answer)).toBe(true);
    expect(await isReady(server.url)).toBe(true);
  });

  it('refuses a request with both Transfer-Encoding and Content-Length (request smuggling; Triton accepts it), 400 saying why', async () => {
    const body = simpleBody();
    const chunked = `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    for (const headers of [
      `Transfer-Encoding: chunked\r\nContent-Length: ${chunked.length}`,
      `Content-Length: ${chunked.length}\r\nTransfer-Encoding: chunked`,
    ]) {
      const answer = await new Promise<string>((resolve) => {
        let data = '';
        const socket = connect(server.httpPort, '127.0.0.1', () =>
          socket.write(
            `POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${headers}\r\n\r\n${chunked}`,
          ),
        );
        socket.on('data', (d) => (data += d));
        socket.on('close', () => resolve(data));
        socket.on('error', () => resolve(data));
      });
      expect(answer, headers).toMatch(/^HTTP\/1.1 400 Bad Request\r\n/);
      expect(answer).toMatch(/\r\nConnection: close\r\n/i);
      const error = (JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { error: string }).error;
      expect(error).toMatch(
        /^a request with both Transfer-Encoding and Content-Length is refused, .*\(request smuggling\): send only one of them \(/,
      );
    }
    // Either header alone is served, and the server goes on.
    expect((await send(simple, simpleBody())).status).toBe(200);
    expect(await isReady(server.url)).toBe(true);
  });
});

async function asJson(r: { status: number; body: Buffer }) {
  return { status: r.status, json: JSON.parse(r.body.toString() || '{}') };
}
