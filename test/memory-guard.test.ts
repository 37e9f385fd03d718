import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity, mlp } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { BatchwiseClientError, GrpcClient, GrpcStatus, type InferResult } from '@batchwise/client';
import { isReady, postBinary, postJson, splitBinaryResponse, startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;
const MiB = 1024 * 1024;

const metricIn = async (metricsPort: number, name: string) => {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
};
/** Bytes requests may hold now: budget less baseline less what is held. */
const roomIn = async (metricsPort: number) =>
  (await metricIn(metricsPort, 'batchwise_memory_budget_bytes')) -
  (await metricIn(metricsPort, 'batchwise_memory_baseline_bytes')) -
  (await metricIn(metricsPort, 'batchwise_memory_accounted_bytes'));

const floatsRequest = (floats: number) => ({
  header: {
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, floats], parameters: { binary_data_size: floats * 4 } }],
    parameters: { binary_data_output: true },
  },
  tensors: [new Uint8Array(new Float32Array(floats).fill(0.25).buffer)],
});

describe('memory budget admission control', () => {
  let server: Server;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([{ name: 'id', model: identity('FP32', [-1]) }]);
    remove = repo.remove;
    // The server runs in this process: a budget of what it uses now plus 256 MiB (starting the server takes some of that).
    const budget = process.memoryUsage.rss() + 256 * MiB;
    server = await startTestServer([repo.dir], { memoryLimit: String(budget), maxBodyBytes: 2048 * MiB });
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  const send = (floats: number) => {
    const { header, tensors } = floatsRequest(floats);
    return postBinary(`${server.url}/v2/models/id/infer`, header, tensors);
  };
  const metric = (name: string) => metricIn(server.metricsPort, name);

  it('refuses a request that would exceed the budget with 503 at once, and keeps serving small ones', async () => {
    expect((await send(1024)).status).toBe(200);
    // Only the headers and the start of a 1 GiB body are sent: the answer must come from
    // Content-Length alone, before the body is read.
    const started = Date.now();
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(server.httpPort, '127.0.0.1', () => {
        socket.write(
          `POST /v2/models/id/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n` +
            `Inference-Header-Content-Length: 10\r\nContent-Length: ${1024 * MiB}\r\n\r\n{"inputs":`,
        );
      });
      let data = '';
      socket.on('data', (d) => {
        data += d;
        if (data.includes('}')) {
          socket.destroy();
          resolve(data);
        }
      });
      socket.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1.1 503/);
    expect(answer).toMatch(/over its memory budget/);
    expect(Date.now() - started).toBeLessThan(2000);
    expect((await send(1024)).status).toBe(200);
    expect(await isReady(server.url)).toBe(true);
    expect(await metric('batchwise_memory_rejections_total')).toBe(1);
    expect(await metric('batchwise_memory_accounted_bytes')).toBe(0);
    expect(await metric('batchwise_memory_budget_bytes')).toBeGreaterThan(256 * MiB);
  });

  it('charges a chunked body as it streams and refuses it with 503 once it would exceed the budget', async () => {
    const rejectionsBefore = await metric('batchwise_memory_rejections_total');
    // The server answers and closes while the client is still sending: the client may see the
    // answer, or only the connection reset, depending on which reaches it first.
    const answer = await new Promise<string>((resolve, reject) => {
      let data = '';
      const socket = connect(server.httpPort, '127.0.0.1', () => {
        socket.write(
          `POST /v2/models/id/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n` +
            `Inference-Header-Content-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n`,
        );
        const chunk = Buffer.alloc(4 * MiB, 0x20);
        let sent = 0;
        const more = () => {
          if (socket.destroyed || data.length > 0) return;
          // The budget leaves well under 1 GiB to requests: a server still reading by then failed.
          if ((sent += chunk.length) > 1024 * MiB) return reject(new Error('1 GiB sent and no answer'));
          socket.write(`${chunk.length.toString(16)}\r\n`);
          socket.write(chunk);
          socket.write('\r\n', (error) => error || more());
        };
        more();
      });
      socket.on('data', (d) => (data += d));
      socket.on('close', () => resolve(data));
      socket.on('error', () => socket.destroy());
    });
    if (answer !== '') {
      expect(answer).toMatch(/^HTTP\/1.1 503/);
      expect(answer).toMatch(/over its memory budget/);
    }
    expect(await metric('batchwise_memory_rejections_total')).toBe(rejectionsBefore + 1);
    expect(await metric('batchwise_memory_accounted_bytes')).toBe(0);
    expect((await send(16)).status).toBe(200);
  });

  it('admits small requests again once a large admitted request completes, whatever RSS the burst left', async () => {
    const baseline = await metric('batchwise_memory_baseline_bytes');
    // Body, batch copy, output and binary reply: about 4 x 4 bytes per float, under the room left.
    const floats = Math.floor((await roomIn(server.metricsPort)) / 20);
    const big = await send(floats);
    expect(big.status).toBe(200);
    expect(big.body.length).toBeGreaterThan(floats * 4);
    for (let i = 0; i < 5; i++) expect((await send(16)).status).toBe(200);
    expect(await metric('batchwise_memory_accounted_bytes')).toBe(0);
    // The baseline is not re-measured from RSS after the burst (only the JavaScript heap's
    // growth is followed, a few MiB here), so a request as large is admitted again.
    expect((await metric('batchwise_memory_baseline_bytes')) - baseline).toBeLessThan(16 * MiB);
    expect((await send(Math.floor(floats * 0.9))).status).toBe(200);
    expect(await isReady(server.url)).toBe(true);
  });

  it('charges a JSON reply for its text, so a request admitted with a binary reply is refused with a JSON one', async () => {
    const floats = Math.floor((await roomIn(server.metricsPort)) / 20);
    const { header, tensors } = floatsRequest(floats);
    const json = await postBinary(`${server.url}/v2/models/id/infer`, { ...header, parameters: {} }, tensors);
    expect(json.status).toBe(503);
    expect(json.body.toString()).toMatch(/over its memory budget/);
    expect((await send(floats)).status).toBe(200);
    expect(await metric('batchwise_memory_accounted_bytes')).toBe(0);
  });
});

describe('concurrent requests beyond the budget', () => {
  // Requests wait in the queue for up to 8 s to form a batch, so the admitted ones are still
  // held while the others arrive.
  const config = `name: "held"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 8000000 }`;
  let server: Server;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([{ name: 'held', model: identity('FP32', [-1]), config }]);
    remove = repo.remove;
    server = await startTestServer([repo.dir], { memoryLimit: String(process.memoryUsage.rss() + 160 * MiB) });
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  it('the excess get 503 / RESOURCE_EXHAUSTED naming the memory budget, over HTTP and gRPC; the admitted complete', async () => {
    // Each request is charged about 4 x its input bytes (received, batch copy, output, binary
    // reply): with inputs of a ninth of the room, two fit and a third does not.
    const floats = Math.floor((await roomIn(server.metricsPort)) / 9 / 4) - 64;
    const { header, tensors } = floatsRequest(floats);
    const viaHttp = () => postBinary(`${server.url}/v2/models/held/infer`, header, tensors);
    const client = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
    const data = new Float32Array(floats).fill(0.25);
    const viaGrpc = () =>
      client.infer({ model: 'held', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, floats], data }] }).catch((e: unknown) => e);
    try {
      const admitted = [viaHttp(), viaGrpc()] as const;
      while ((await metricIn(server.metricsPort, 'nv_inference_pending_request_count{model="held",version="1"}')) !== 2) {
        await new Promise((r) => setTimeout(r, 20));
      }
      const [httpRefused, grpcRefused] = await Promise.all([
        Promise.all(Array.from({ length: 4 }, viaHttp)),
        Promise.all(Array.from({ length: 4 }, viaGrpc)),
      ]);
      for (const a of httpRefused) {
        expect(a.status).toBe(503);
        expect(a.body.toString()).toMatch(/over its memory budget/);
      }
      for (const e of grpcRefused) {
        expect(e).toBeInstanceOf(BatchwiseClientError);
        expect((e as BatchwiseClientError).grpcCode).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
        expect((e as Error).message).toMatch(/over its memory budget/);
      }
      const [httpOk, grpcOk] = await Promise.all(admitted);
      expect(httpOk.status).toBe(200);
      const { binary } = splitBinaryResponse(httpOk);
      expect(binary.length).toBe(floats * 4);
      expect(binary.readFloatLE(binary.length - 4)).toBe(0.25);
      expect(((grpcOk as InferResult).outputs[0]!.data as Float32Array)[floats - 1]).toBe(0.25);
    } finally {
      await client.close();
    }
    expect(await metricIn(server.metricsPort, 'batchwise_memory_accounted_bytes')).toBe(0);
    expect(await metricIn(server.metricsPort, 'batchwise_memory_rejections_total')).toBe(8);
    expect(await isReady(server.url)).toBe(true);
  });
});

describe('a model whose footprint does not fit the budget', () => {
  it('fails to load with the figures, and the others serve', async () => {
    const big = `name: "big"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2048 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2048 ] } ]
instance_group [ { kind: KIND_CPU count: 16 } ]`;
    const repo = await makeRepository([
      { name: 'big', model: mlp({ layers: 2, width: 2048 }), config: big },
      { name: 'small', model: identity('FP32', [4]) },
    ]);
    // 16 instances of a 33 MB model need about 540 MB; the budget leaves about 256 MiB.
    const server = await startTestServer([repo.dir], { memoryLimit: String(process.memoryUsage.rss() + 256 * MiB) });
    try {
      const { json } = await postJson(`${server.url}/v2/repository/index`, {});
      const row = json.find((r: { name: string }) => r.name === 'big');
      expect(row.state).toBe('UNAVAILABLE');
      expect(row.reason).toMatch(
        /needs about \d+ bytes of host memory .* x 16 CPU instances, and 16 worker threads of \d+ bytes\) but only \d+ bytes of the memory budget/,
      );
      expect((await fetch(`${server.url}/v2/models/small/ready`)).status).toBe(200);
    } finally {
      await server.close();
      await repo.remove();
    }
  });
});
