/**
 * gRPC over HTTP/2, served by node:http2 directly (issue 44).
 *
 * Why hand-written: @grpc/grpc-js's Server cost about twice what a bare node:http2 server costs per
 * call (measured with h2load on a ModelInfer message: 190-224 us of server CPU a call against
 * 108-125 us; the rest went to its interceptor chain, Metadata built for every call, its object
 * streams, and serialization through its generic handlers). This keeps the wire format and the
 * behaviour clients depend on, and nothing else: routing `/<package.Service>/<Method>`, POST and
 * `application/grpc` checks (415 otherwise, as grpc-js answers), UNIMPLEMENTED for unknown methods,
 * length-prefixed messages (server-call.ts, message-framing.ts), gzip/deflate requests
 * (compression.ts), size limits, `grpc-timeout` deadlines, cancellation, metadata (read from the
 * headers, or as grpc-js's Metadata when asked for), status in trailers (trailers.ts), keepalive pings
 * and max connection age (session-policy.ts), graceful shutdown. Every call costs one ServerCall and
 * what node:http2 itself costs; a unary answer is one respond + one end + its trailers. Measured the
 * same way, this transport answering a ModelInfer with its own bytes costs what the bare node:http2
 * server does (105-118 us against 108-110).
 */
import { createServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { applySessionPolicy, type SessionPolicy } from './session-policy.ts';
import { refuseStream, ServerCall, unimplemented, type CallLimits, type MethodHandler } from './server-call.ts';

export interface GrpcServerOptions extends SessionPolicy, CallLimits {
  /** Told of a connection's errors (they close that connection only). @default ignored */
  readonly onSessionError?: (error: Error) => void;
  /** Told of each call to a served method as its stream opens, before its message is read. @default ignored */
  readonly onCall?: (path: string) => void;
}

export interface GrpcServer {
  /** Binds and serves; resolves to the bound port (useful with port 0). Rejects with Node's listen error (EADDRINUSE ...). */
  listen(host: string, port: number): Promise<number>;
  /**
   * Stops accepting connections, and sends every connection GOAWAY: calls already sent run to their
   * end, new ones are refused. Resolves once the last connection has closed.
   */
  shutdown(): Promise<void>;
  /** Closes every connection now: their calls still open are cancelled. */
  destroy(): void;
}

/**
 * A gRPC server for `methods`, keyed by path (`/inference.GRPCInferenceService/ModelInfer`).
 */
export function createGrpcServer(methods: ReadonlyMap<string, MethodHandler>, options: GrpcServerOptions): GrpcServer {
  const limits: CallLimits = { maxReceiveBytes: options.maxReceiveBytes, maxSendBytes: options.maxSendBytes };
  const sessions = new Set<ServerHttp2Session>();
  const server: Http2Server = createServer({
    // As grpc-js sets them: metadata of any size goes out, and no session is refused for the memory
    // its streams hold (each call's reading is bounded by flow control and the message limit).
    maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER,
    maxSessionMemory: Number.MAX_SAFE_INTEGER,
  });

  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    // A stream's error (a reset with an error code) is its close, seen by its call as 'aborted'.
    stream.on('error', ignore);
    if (headers[':method'] !== 'POST') return refuseStream(stream, 405);
    if (!isGrpcContentType(headers['content-type'])) return refuseStream(stream, 415);
    const path = headers[':path']!;
    const method = methods.get(path);
    if (method === undefined) return unimplemented(stream, path);
    options.onCall?.(path);
    new ServerCall(stream, headers, path, method, limits);
  });

  server.on('session', (session: ServerHttp2Session) => {
    sessions.add(session);
    const stop = applySessionPolicy(session, options);
    session.once('close', () => {
      sessions.delete(session);
      stop();
    });
  });
  server.on('sessionError', (error: Error) => options.onSessionError?.(error));

  let closed: Promise<void> | undefined;
  return {
    listen(host, port) {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve((server.address() as AddressInfo).port);
        });
      });
    },
    shutdown() {
      closed ??= new Promise((resolve) => {
        if (!server.listening) return resolve();
        server.close(() => resolve());
        for (const session of sessions) session.close();
      });
      return closed;
    },
    destroy() {
      for (const session of sessions) session.destroy();
    },
  };
}

/** `application/grpc`, `application/grpc+proto`, either with parameters (`;...`). */
export function isGrpcContentType(value: string | undefined): boolean {
  if (value === 'application/grpc' || value === 'application/grpc+proto') return true;
  if (value === undefined) return false;
  const type = value.split(';', 1)[0]!.trim().toLowerCase();
  return type === 'application/grpc' || type === 'application/grpc+proto';
}

function ignore(): void {}
