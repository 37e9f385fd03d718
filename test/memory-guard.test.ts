import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity, mlp } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { isReady, postBinary, postJson, startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;
const MiB = 1024 * 1024;

describe('memory budget admission control', () => {
  let server: Server;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([{ name: 'id', model: identity('FP32', [-1]) }]);
    remove = repo.remove;
    // The server runs in this process: a budget of what it uses now plus 256 MiB (starting the server takes some of that).
    const budget = process.memoryUsage.rss() + 256 * MiB;
    server = await startTestServer([repo.dir], { memoryLimit: String(budget), maxBodyBytes: 512 * MiB });
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  const send = (floats: number) =>
    postBinary(
      `${server.url}/v2/models/id/infer`,
      { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, floats], parameters: { binary_data_size: floats * 4 } }] },
      [new Uint8Array(floats * 4)],
    );
  const metric = async (name: string) => {
    const text = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
    return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
  };

  it('refuses a request that would exceed the budget with 503 at once, and keeps serving small ones', async () => {
    expect((await send(1024)).status).toBe(200);
    // Only the headers and the start of a 128 MiB body are sent: the answer must come from
    // Content-Length alone, before the body is read.
    const started = Date.now();
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(server.httpPort, '127.0.0.1', () => {
        socket.write(
          `POST /v2/models/id/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n` +
            `Inference-Header-Content-Length: 10\r\nContent-Length: ${128 * MiB}\r\n\r\n{"inputs":`,
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
      expect(row.reason).toMatch(/needs about \d+ bytes of host memory .* x 16 CPU instances\) but only \d+ bytes of the memory budget/);
      expect((await fetch(`${server.url}/v2/models/small/ready`)).status).toBe(200);
    } finally {
      await server.close();
      await repo.remove();
    }
  });
});
