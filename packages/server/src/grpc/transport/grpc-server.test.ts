/**
 * The hand-written gRPC transport against grpc-js's client and raw node:http2 frames: routing,
 * refusals, framing, compression, limits, deadlines, cancellation, metadata both ways, keepalive,
 * max connection age and shutdown. The services on it (GRPCInferenceService, health) are tested end
 * to end in test/grpc-*.test.ts, with grpc-js, Triton's Python clients and perf_analyzer's protos.
 */
import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { connect as connectTcp } from 'node:net';
import { gzipSync } from 'node:zlib';
import { Client, credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createGrpcServer, type GrpcServer, type GrpcServerOptions } from './grpc-server.ts';
import { frameMessage } from './message-framing.ts';
import type { MethodHandler, ServerCall } from './server-call.ts';

const identity = (b: Buffer) => b;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What the test methods saw of their calls. */
const seen = { cancelled: [] as string[], aborted: [] as string[] };

/**
 * The test service: Echo answers its message (and the call's custom metadata as initial metadata);
 * Wait answers after the milliseconds its message names ('never': it does not), noting a
 * cancellation; Fail ends with the status and trailing metadata its message names; Big answers
 * as many bytes as its message names; Stream echoes each message and ends with a trailing count.
 */
const METHODS = new Map<string, MethodHandler>([
  ['/test.T/Echo', { streaming: false, handle: (call, message) => call.sendUnary(frameMessage(message), echoedMetadata(call)) }],
  [
    '/test.T/Wait',
    {
      streaming: false,
      handle(call, message) {
        const id = call.metadataValue('x-id') ?? '';
        call.signal.addEventListener('abort', () => seen.aborted.push(id));
        const wait = message.toString();
        if (wait !== 'never') setTimeout(() => call.sendUnary(frameMessage(Buffer.from('done'))), Number(wait));
      },
    },
  ],
  [
    '/test.T/Fail',
    {
      streaming: false,
      handle: (call, message) => call.end({ code: status.NOT_FOUND, details: message.toString(), metadata: { 'x-why': 'because' } }),
    },
  ],
  ['/test.T/Big', { streaming: false, handle: (call, message) => call.sendUnary(frameMessage(Buffer.alloc(Number(message.toString())))) }],
  [
    '/test.T/Stream',
    {
      streaming: true,
      handle(call: ServerCall) {
        let count = 0;
        const id = call.metadataValue('x-id') ?? '';
        if (call.metadataValue('x-initial') !== undefined) call.sendMetadata({ 'x-initial': 'sent first' });
        call.onMessage = (message) => {
          count++;
          call.write(frameMessage(message));
        };
        // A client's cancel half-closes before it resets: a stream holding on ('x-hold') is still open then.
        call.onHalfClose = () => {
          if (call.metadataValue('x-hold') === undefined)
            call.end({ code: status.OK, details: 'OK', metadata: { 'x-count': String(count) } });
        };
        call.onCancel = () => seen.cancelled.push(id);
      },
    },
  ],
]);

function echoedMetadata(call: ServerCall) {
  const metadata = call.metadata.clone();
  metadata.remove('user-agent');
  return metadata.toHttp2Headers();
}

const OPTIONS: GrpcServerOptions = { maxReceiveBytes: 64 * 1024, maxSendBytes: 64 * 1024, keepaliveTimeMs: 0, keepaliveTimeoutMs: 20_000 };

async function started(options: Partial<GrpcServerOptions> = {}): Promise<{ server: GrpcServer; port: number; address: string }> {
  const server = createGrpcServer(METHODS, { ...OPTIONS, ...options });
  const port = await server.listen('127.0.0.1', 0);
  return { server, port, address: `127.0.0.1:${port}` };
}

function unary(client: Client, path: string, message: Buffer, metadata = new Metadata(), options: object = {}) {
  let initial: Metadata | undefined;
  const result = new Promise<{ message: Buffer; initial: Metadata | undefined }>((resolve, reject) => {
    const call = client.makeUnaryRequest(path, identity, identity, message, metadata, options, (error, response) =>
      error ? reject(error) : resolve({ message: response!, initial }),
    );
    call.on('metadata', (m) => (initial = m));
  });
  return result;
}

async function failure(promise: Promise<unknown>): Promise<ServiceError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e as ServiceError,
  );
  expect(error, 'the call must fail').toBeDefined();
  return error!;
}

/** One raw HTTP/2 call: its response headers, DATA, trailers. */
function rawCall(session: ClientHttp2Session, path: string, headers: Record<string, string> = {}) {
  const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...headers });
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  const done = new Promise<{ headers: IncomingHttpHeaders; trailers: IncomingHttpHeaders; data: Buffer }>((resolve, reject) => {
    let response: IncomingHttpHeaders = {};
    let trailers: IncomingHttpHeaders = {};
    stream.on('response', (h) => (response = h));
    stream.on('trailers', (t) => (trailers = t));
    stream.on('error', reject);
    stream.on('close', () => resolve({ headers: response, trailers, data: Buffer.concat(chunks) }));
  });
  return { stream, done };
}

/** The messages of a response body. */
function messagesOf(data: Buffer): string[] {
  const out: string[] = [];
  for (let at = 0; at < data.length;) {
    const length = data.readUInt32BE(at + 1);
    out.push(data.subarray(at + 5, at + 5 + length).toString());
    at += 5 + length;
  }
  return out;
}

/** Writes `chunk` and waits until it has left as DATA frames of its own (not coalesced with the next write). */
async function writeApart(stream: ClientHttp2Stream, chunk: Buffer): Promise<void> {
  await new Promise<void>((resolve, reject) => stream.write(chunk, (e) => (e ? reject(e) : resolve())));
  await sleep(5);
}

describe('the gRPC transport', () => {
  let served: Awaited<ReturnType<typeof started>>;
  let client: Client;
  let session: ClientHttp2Session;
  beforeAll(async () => {
    served = await started();
    client = new Client(served.address, credentials.createInsecure());
    session = connect(`http://${served.address}`);
  });
  afterAll(async () => {
    client?.close();
    session?.close();
    await served?.server.shutdown();
  });

  it('answers unary calls, custom metadata both ways, -bin values included', async () => {
    const metadata = new Metadata();
    metadata.set('x-text', 'hi there');
    metadata.set('x-data-bin', Buffer.from([0, 1, 255]));
    const { message, initial } = await unary(client, '/test.T/Echo', Buffer.from('ping'), metadata);
    expect(message.toString()).toBe('ping');
    expect(initial!.get('x-text')).toEqual(['hi there']);
    expect(initial!.get('x-data-bin')).toEqual([Buffer.from([0, 1, 255])]);
    // Transport headers are not metadata.
    expect(initial!.get('te')).toEqual([]);
  });

  it('tells onCall of each call to a served method as its stream opens, before its message comes', async () => {
    const calls: string[] = [];
    const own = await started({ onCall: (path) => calls.push(path) });
    const raw = connect(`http://${own.address}`);
    try {
      const { stream, done } = rawCall(raw, '/test.T/Echo');
      for (const until = Date.now() + 5000; calls.length === 0 && Date.now() < until;) await sleep(5);
      expect(calls).toEqual(['/test.T/Echo']);
      stream.end(frameMessage(Buffer.from('later')));
      expect(messagesOf((await done).data)).toEqual(['later']);
      // A method not served is not a call: onCall is not told.
      const unknown = rawCall(raw, '/test.T/Nope');
      unknown.stream.end();
      await unknown.done;
      expect(calls).toEqual(['/test.T/Echo']);
    } finally {
      raw.close();
      await own.server.shutdown();
    }
  });

  it('ends with a status message percent-encoded and trailing metadata, trailers-only when nothing was sent', async () => {
    const details = 'no model "m" (100% sure) — ünïcode\nnext line';
    const error = await failure(unary(client, '/test.T/Fail', Buffer.from(details)));
    expect(error.code).toBe(status.NOT_FOUND);
    expect(error.details).toBe(details);
    expect(error.metadata.get('x-why')).toEqual(['because']);
    // Trailers-only: the status in the response headers, no DATA.
    const raw = rawCall(session, '/test.T/Fail');
    raw.stream.end(frameMessage(Buffer.from('50%')));
    const { headers, data } = await raw.done;
    expect(headers).toMatchObject({ ':status': 200, 'grpc-status': '5', 'grpc-message': '50%25', 'x-why': 'because' });
    expect(data.length).toBe(0);
  });

  it('streams both ways: initial metadata sent first, then the messages, a status and trailing metadata', async () => {
    const metadata = new Metadata();
    metadata.set('x-initial', '1');
    const call = client.makeBidiStreamRequest('/test.T/Stream', identity, identity, metadata);
    const initial = new Promise<Metadata>((resolve) => call.on('metadata', resolve));
    const received: string[] = [];
    call.on('data', (m: Buffer) => received.push(m.toString()));
    const ended = new Promise<{ code: number; metadata: Metadata }>((resolve) => call.on('status', resolve));
    expect((await initial).get('x-initial')).toEqual(['sent first']);
    for (const m of ['a', 'bb', '', 'ccc']) call.write(Buffer.from(m));
    call.end();
    const end = await ended;
    expect(received).toEqual(['a', 'bb', '', 'ccc']);
    expect(end.code).toBe(status.OK);
    expect(end.metadata.get('x-count')).toEqual(['4']);
  });

  it('reads messages split across DATA frames, and several in one', async () => {
    const { stream, done } = rawCall(session, '/test.T/Stream');
    const one = frameMessage(Buffer.from('first message'));
    for (let i = 0; i < one.length; i += 3) await writeApart(stream, one.subarray(i, i + 3));
    await writeApart(stream, Buffer.concat(['two', 'three', 'four'].map((m) => frameMessage(Buffer.from(m)))));
    const five = frameMessage(Buffer.from('five'));
    const six = frameMessage(Buffer.from('six'));
    await writeApart(stream, Buffer.concat([five, six.subarray(0, 2)]));
    stream.end(six.subarray(2));
    const { headers, trailers, data } = await done;
    expect(headers[':status']).toBe(200);
    expect(messagesOf(data)).toEqual(['first message', 'two', 'three', 'four', 'five', 'six']);
    expect(trailers).toMatchObject({ 'grpc-status': '0', 'x-count': '6' });
  });

  it.each([
    ['gzip', 2],
    ['deflate', 1],
  ])('decompresses %s requests (a grpc-js client with grpc.default_compression_algorithm)', async (_name, algorithm) => {
    const compressing = new Client(served.address, credentials.createInsecure(), { 'grpc.default_compression_algorithm': algorithm });
    try {
      const text = 'compress me '.repeat(1000);
      expect((await unary(compressing, '/test.T/Echo', Buffer.from(text))).message.toString()).toBe(text);
      const call = compressing.makeBidiStreamRequest('/test.T/Stream', identity, identity, new Metadata());
      const received: string[] = [];
      call.on('data', (m: Buffer) => received.push(m.toString()));
      const ended = new Promise((resolve) => call.on('status', resolve));
      for (const m of ['x'.repeat(500), 'y', 'z'.repeat(3000)]) call.write(Buffer.from(m));
      call.end();
      await ended;
      expect(received).toEqual(['x'.repeat(500), 'y', 'z'.repeat(3000)]);
    } finally {
      compressing.close();
    }
  });

  it('refuses compressed messages it cannot read: unknown encoding, no encoding, too large once inflated', async () => {
    const compressed = frameMessage(gzipSync(Buffer.alloc(100 * 1024)));
    compressed[0] = 1;
    const tooLarge = rawCall(session, '/test.T/Echo', { 'grpc-encoding': 'gzip' });
    tooLarge.stream.end(compressed);
    expect((await tooLarge.done).headers).toMatchObject({
      'grpc-status': String(status.RESOURCE_EXHAUSTED),
      'grpc-message': `Received message that decompresses to a size larger than ${64 * 1024}`,
    });
    const unknown = rawCall(session, '/test.T/Echo', { 'grpc-encoding': 'snappy' });
    unknown.stream.end(compressed);
    expect((await unknown.done).headers).toMatchObject({
      'grpc-status': String(status.UNIMPLEMENTED),
      'grpc-message': 'Received message compressed with unsupported encoding "snappy"',
    });
    const none = rawCall(session, '/test.T/Echo');
    none.stream.end(compressed);
    expect((await none.done).headers['grpc-status']).toBe(String(status.INTERNAL));
  });

  it('answers 415 to a content type that is not gRPC, 405 to a method other than POST', async () => {
    const json = rawCall(session, '/test.T/Echo', { 'content-type': 'application/json' });
    json.stream.end();
    expect((await json.done).headers[':status']).toBe(415);
    const get = session.request({ ':method': 'GET', ':path': '/test.T/Echo', 'content-type': 'application/grpc' });
    get.resume();
    const headers = await new Promise<IncomingHttpHeaders>((resolve) => get.on('response', resolve));
    expect(headers[':status']).toBe(405);
  });

  it('answers UNIMPLEMENTED to an unknown method, in grpc-js words', async () => {
    const error = await failure(unary(client, '/test.T/Nope', Buffer.from('x')));
    expect(error.code).toBe(status.UNIMPLEMENTED);
    expect(error.details).toBe('The server does not implement the method /test.T/Nope');
  });

  it('refuses a unary call without its message, or with two', async () => {
    const none = rawCall(session, '/test.T/Echo');
    none.stream.end();
    expect((await none.done).headers['grpc-status']).toBe(String(status.UNIMPLEMENTED));
    const two = rawCall(session, '/test.T/Echo');
    two.stream.end(Buffer.concat([frameMessage(Buffer.from('a')), frameMessage(Buffer.from('b'))]));
    expect((await two.done).headers['grpc-status']).toBe(String(status.UNIMPLEMENTED));
    const cut = rawCall(session, '/test.T/Echo');
    cut.stream.end(frameMessage(Buffer.from('abc')).subarray(0, 6));
    expect((await cut.done).headers['grpc-status']).toBe(String(status.INTERNAL));
  });

  it('refuses messages over the limits with RESOURCE_EXHAUSTED, in grpc-js words', async () => {
    const received = await failure(unary(client, '/test.T/Echo', Buffer.alloc(64 * 1024 + 1)));
    expect(received.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(received.details).toBe(`Received message larger than max (${64 * 1024 + 1} vs ${64 * 1024})`);
    const sent = await failure(unary(client, '/test.T/Big', Buffer.from(String(64 * 1024 + 1))));
    expect(sent.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(sent.details).toBe(`Sent message larger than max (${64 * 1024 + 6} vs. ${64 * 1024})`);
    expect((await unary(client, '/test.T/Big', Buffer.from(String(64 * 1024)))).message.length).toBe(64 * 1024);
  });

  it('ends a call at its grpc-timeout with DEADLINE_EXCEEDED and aborts its signal', async () => {
    const metadata = new Metadata();
    metadata.set('x-id', 'deadline');
    const error = await failure(unary(client, '/test.T/Wait', Buffer.from('never'), metadata, { deadline: Date.now() + 200 }));
    expect(error.code).toBe(status.DEADLINE_EXCEEDED);
    await expect.poll(() => seen.aborted).toContain('deadline');
    // The server's own deadline, seen on the wire (grpc-js's client also keeps its own).
    const raw = rawCall(session, '/test.T/Wait', { 'grpc-timeout': '100m', 'x-id': 'raw-deadline' });
    raw.stream.end(frameMessage(Buffer.from('never')));
    expect((await raw.done).headers).toMatchObject({
      'grpc-status': String(status.DEADLINE_EXCEEDED),
      'grpc-message': 'Deadline exceeded',
    });
    expect(seen.aborted).toContain('raw-deadline');
    // A call within its deadline is answered.
    expect(
      (await unary(client, '/test.T/Wait', Buffer.from('10'), new Metadata(), { deadline: Date.now() + 5000 })).message.toString(),
    ).toBe('done');
    const invalid = rawCall(session, '/test.T/Echo', { 'grpc-timeout': 'soon' });
    invalid.stream.end(frameMessage(Buffer.from('x')));
    expect((await invalid.done).headers).toMatchObject({
      'grpc-status': String(status.INTERNAL),
      'grpc-message': 'Invalid grpc-timeout value "soon"',
    });
  });

  it("tells a call its client cancelled it (RST_STREAM): the signal aborts, a stream's onCancel runs", async () => {
    const metadata = new Metadata();
    metadata.set('x-id', 'cancelled-unary');
    const call = client.makeUnaryRequest('/test.T/Wait', identity, identity, Buffer.from('never'), metadata, () => undefined);
    await sleep(100);
    call.cancel();
    await expect.poll(() => seen.aborted).toContain('cancelled-unary');
    const streamMetadata = new Metadata();
    streamMetadata.set('x-id', 'cancelled-stream');
    streamMetadata.set('x-hold', '1');
    const stream = client.makeBidiStreamRequest('/test.T/Stream', identity, identity, streamMetadata);
    stream.on('error', () => undefined);
    stream.write(Buffer.from('a'));
    await new Promise((resolve) => stream.once('data', resolve));
    stream.cancel();
    await expect.poll(() => seen.cancelled).toContain('cancelled-stream');
  });

  it('rejects listening on a port in use with Node EADDRINUSE error (what cli/port-in-use.ts reads)', async () => {
    const second = createGrpcServer(METHODS, OPTIONS);
    await expect(second.listen('127.0.0.1', served.port)).rejects.toThrow(
      new RegExp(`EADDRINUSE: address already in use 127\\.0\\.0\\.1:${served.port}`),
    );
  });
});

describe('connections over their life', () => {
  const servers: GrpcServer[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      server.destroy();
      await server.shutdown();
    }
  });
  const start = async (options: Partial<GrpcServerOptions>) => {
    const s = await started(options);
    servers.push(s.server);
    return s;
  };

  it('pings every keepaliveTimeMs; a client that answers stays connected', async () => {
    const { address } = await start({ keepaliveTimeMs: 50, keepaliveTimeoutMs: 1000 });
    const session = connect(`http://${address}`);
    try {
      let pings = 0;
      session.on('ping', () => pings++);
      // Three pings come within 150 ms on a quiet machine; a loaded CI runner's timers run late, so wait up to 5 s.
      for (let waited = 0; pings < 3 && waited < 5000; waited += 50) await sleep(50);
      expect(pings).toBeGreaterThanOrEqual(3);
      expect(session.closed || session.destroyed).toBe(false);
    } finally {
      session.destroy();
    }
  });

  it('closes a connection whose client stops answering pings, after keepaliveTimeoutMs', async () => {
    const { port } = await start({ keepaliveTimeMs: 100, keepaliveTimeoutMs: 200 });
    // A client speaking raw HTTP/2 that never acknowledges a PING.
    const socket = connectTcp(port, '127.0.0.1');
    const frames: number[] = [];
    let buffered = Buffer.alloc(0);
    socket.on('data', (data: Buffer) => {
      buffered = Buffer.concat([buffered, data]);
      while (buffered.length >= 9 && buffered.length >= 9 + buffered.readUIntBE(0, 3)) {
        frames.push(buffered[3]!);
        buffered = buffered.subarray(9 + buffered.readUIntBE(0, 3));
      }
    });
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())));
    const opened = Date.now();
    socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])]));
    const at = await closed;
    expect(frames).toContain(6); // a PING frame
    expect(at - opened).toBeGreaterThanOrEqual(250);
    expect(at - opened).toBeLessThan(5000);
  });

  it('sends GOAWAY at max connection age; calls in flight finish, or are cut at the grace', async () => {
    const { address } = await start({ maxConnectionAgeMs: 200, maxConnectionAgeGraceMs: 600 });
    const session = connect(`http://${address}`);
    try {
      const goaway = new Promise<number>((resolve) => session.once('goaway', resolve));
      const finishing = rawCall(session, '/test.T/Wait');
      finishing.stream.end(frameMessage(Buffer.from('400')));
      const hanging = rawCall(session, '/test.T/Wait');
      hanging.stream.end(frameMessage(Buffer.from('never')));
      hanging.done.catch(() => undefined);
      expect(await goaway).toBe(constants.NGHTTP2_NO_ERROR);
      const finished = await finishing.done;
      expect(finished.trailers['grpc-status']).toBe('0');
      expect(messagesOf(finished.data)).toEqual(['done']);
      // The grace over, the connection is closed under the call that never ends.
      await new Promise((resolve) => session.once('close', resolve));
      const cut = await hanging.done.catch(() => undefined);
      expect(cut?.trailers['grpc-status']).toBeUndefined();
    } finally {
      session.destroy();
    }
  });

  it('shuts down gracefully: calls in flight finish, new connections are refused; destroy() cancels what is left', async () => {
    const { server, address, port } = await start({});
    const client = new Client(address, credentials.createInsecure());
    try {
      const inFlight = unary(client, '/test.T/Wait', Buffer.from('300'));
      const metadata = new Metadata();
      metadata.set('x-id', 'destroyed');
      const hanging = unary(client, '/test.T/Wait', Buffer.from('never'), metadata);
      hanging.catch(() => undefined);
      await sleep(100);
      let shutDown = false;
      const shutdown = server.shutdown().then(() => (shutDown = true));
      expect((await inFlight).message.toString()).toBe('done');
      const refused = await new Promise<string>((resolve) => {
        const socket = connectTcp(port, '127.0.0.1');
        socket.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
        socket.on('connect', () => (socket.destroy(), resolve('connected')));
      });
      expect(refused).toBe('ECONNREFUSED');
      expect(shutDown).toBe(false);
      server.destroy();
      await shutdown;
      await expect.poll(() => seen.aborted).toContain('destroyed');
      expect((await failure(hanging)).code).not.toBe(status.OK);
    } finally {
      client.close();
    }
  });
});
