import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { LeanSseClient } from '../src/lean-sse.ts';

/** A raw server answering every request with `response`, written in pieces of `split` bytes. */
async function serve(response: Buffer, split: number): Promise<{ server: Server; port: number }> {
  const server = createServer((socket: Socket) => {
    let got = '';
    socket.on('data', async (chunk) => {
      got += chunk.toString('latin1');
      const head = got.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(got);
      if (head < 0 || !length || got.length < head + 4 + Number(length[1])) return;
      got = '';
      for (let i = 0; i < response.length; i += split) {
        socket.write(response.subarray(i, i + split));
        await new Promise((r) => setImmediate(r));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as { port: number }).port };
}

function chunked(events: string[]): Buffer {
  const body = events.map((e) => {
    const bytes = Buffer.from(e);
    return `${bytes.length.toString(16)}\r\n${e}\r\n`;
  });
  return Buffer.from(
    'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n' + body.join('') + '0\r\n\r\n',
  );
}

const EVENTS = [
  'data: {"text_output":"a"}\n\n',
  'data: {"text_output":"\\n"}\n\n',
  'data: {"text_output":"c"}\n\ndata: {"text_output":"d"}\n\n',
];

describe('the lean SSE client', () => {
  let server: Server | undefined;
  afterEach(() => server?.close());

  for (const split of [1, 2, 3, 7, 1000]) {
    it(`counts each event once, the stream read in pieces of ${split} bytes, twice on one connection`, async () => {
      const s = await serve(chunked(EVENTS), split);
      server = s.server;
      const client = new LeanSseClient(s.port, '127.0.0.1');
      let calls = 0;
      expect(await client.stream('/v2/models/m/generate_stream', '{}', () => calls++)).toBe(4);
      expect(await client.stream('/v2/models/m/generate_stream', '{}', () => calls++)).toBe(4);
      expect(calls).toBe(8);
      client.close();
    });
  }

  it("fails with the server's text on an error event or a status other than 200", async () => {
    const s = await serve(chunked(['data: {"text_output":"a"}\n\n', 'data: {"error":"model failed"}\n\n']), 5);
    server = s.server;
    const client = new LeanSseClient(s.port, '127.0.0.1');
    await expect(client.stream('/x', '{}', () => undefined)).rejects.toThrow(/an error event: .*model failed/);
    client.close();
    s.server.close();
    const body = '{"error":"no model"}';
    const t = await serve(Buffer.from(`HTTP/1.1 404 Not Found\r\nContent-Length: ${body.length}\r\n\r\n${body}`), 4);
    server = t.server;
    const other = new LeanSseClient(t.port, '127.0.0.1');
    await expect(other.stream('/x', '{}', () => undefined)).rejects.toThrow('HTTP 404: {"error":"no model"}');
    other.close();
  });
});
