import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { measure, SMOKE_WINDOWS } from '@batchwise/client/load';
import { encodeInferHttpRequest, fp32InferRequest, LeanHttpClient, leanFp32Client, sendOk } from '../src/lean-http.ts';

const servers: (Server | HttpServer)[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

async function listen<T extends Server | HttpServer>(server: T): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

describe('the lean HTTP client', () => {
  it('sends the request bytes @batchwise/client would, keeps the connection alive and counts answers per status', async () => {
    const bodies: Buffer[] = [];
    const sockets = new Set<unknown>();
    let n = 0;
    const port = await listen(
      createHttpServer((request, response) => {
        sockets.add(request.socket);
        const chunks: Buffer[] = [];
        request.on('data', (c: Buffer) => chunks.push(c));
        request.on('end', () => {
          bodies.push(Buffer.concat(chunks));
          const status = n++ % 3 === 2 ? 503 : 200;
          const reply = Buffer.alloc(status === 200 ? 70_000 : 0, 1);
          response.writeHead(status, { 'content-type': 'application/octet-stream', 'content-length': reply.length }).end(reply);
        });
      }),
    );
    const url = `http://127.0.0.1:${port}`;
    const client = leanFp32Client(url, 'm', 16);
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) statuses.push(await client.send());
      expect(statuses).toEqual([200, 200, 503, 200, 200, 503]);
      expect(client.statusCounts()).toEqual({ 200: 4, 503: 2 });
      expect(sockets.size).toBe(1);
      const request = encodeInferHttpRequest(url, fp32InferRequest('m', 16));
      const body = request.subarray(request.indexOf('\r\n\r\n') + 4);
      for (const b of bodies) expect(b.equals(body)).toBe(true);
      expect(request.toString('latin1')).toMatch(/^POST \/v2\/models\/m\/infer HTTP\/1\.1\r\nHost: 127\.0\.0\.1:\d+\r\n/);
      expect(request.toString('latin1')).toMatch(/\r\ninference-header-content-length: \d+\r\n/);
    } finally {
      client.close();
    }
  });

  it('reads heads and bodies split anywhere across reads, and a response in one read', async () => {
    const response = Buffer.from('HTTP/1.1 200 OK\r\nContent-Type: x\r\ncontent-length: 10\r\n\r\n0123456789', 'latin1');
    // Each request is answered in pieces of the given sizes, one write each (with a pause between).
    const pieces = [[response.length], [1, 5, 30, response.length], [20, 17, 1, 2, 1, response.length]];
    let turn = 0;
    const port = await listen(
      createServer((socket: Socket) => {
        socket.setNoDelay(true);
        socket.on('data', async () => {
          const sizes = pieces[turn++ % pieces.length]!;
          let at = 0;
          for (const size of sizes) {
            if (at >= response.length) break;
            socket.write(response.subarray(at, Math.min(response.length, at + size)));
            at += size;
            await new Promise((resolve) => setTimeout(resolve, 5));
          }
        });
      }),
    );
    const client = new LeanHttpClient(port, '127.0.0.1', Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    try {
      for (let i = 0; i < 6; i++) expect(await client.send()).toBe(200);
    } finally {
      client.close();
    }
  });

  it('opens a new connection when the server closed an idle one, and rejects when it closes one in use', async () => {
    let connections = 0;
    let closeNext = false;
    const port = await listen(
      createServer((socket: Socket) => {
        connections++;
        socket.on('data', () => {
          if (closeNext) return void socket.destroy();
          socket.write('HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n');
          // The server ends each connection once it answered (as a keep-alive timeout would).
          setTimeout(() => socket.end(), 5);
        });
      }),
    );
    const client = new LeanHttpClient(port, '127.0.0.1', Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    try {
      expect(await client.send()).toBe(204);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await client.send()).toBe(204);
      expect(connections).toBe(2);
      closeNext = true;
      await expect(client.send()).rejects.toThrow(/closed/);
    } finally {
      client.close();
    }
  });

  it('drives measure(): 200s are its throughput, every other status an error', async () => {
    let n = 0;
    const port = await listen(
      createHttpServer((_request, response) => {
        response.writeHead(n++ % 2 === 0 ? 200 : 503, { 'content-length': 0 }).end();
      }),
    );
    const client = leanFp32Client(`http://127.0.0.1:${port}`, 'm', 4);
    try {
      const result = await measure('lean', sendOk(client), { concurrency: 1 }, SMOKE_WINDOWS);
      expect(result.throughput).toBeGreaterThan(0);
      expect(result.errors).toBeGreaterThan(0);
      expect(result.firstError).toBe('HTTP 503');
      const counts = client.statusCounts();
      expect(Math.abs(counts[200]! - counts[503]!)).toBeLessThanOrEqual(1);
    } finally {
      client.close();
    }
  });
});
