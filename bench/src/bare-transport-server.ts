/**
 * The transports alone (issue 44's one-channel target): Node's own HTTP server answering each request with
 * its body, no framework, no decoding. `http1`: node:http, the reply shaped as an HTTP binary infer reply.
 * `http2`: node:http2, the reply a gRPC unary answer (response headers, the request's framed message back,
 * status in trailers), written as the server's gRPC transport writes it. One gRPC channel of 16 streams
 * against 16 HTTP/1.1 connections on these two is the most any server on Node can get of that ratio.
 * Run as a child process with `http1` or `http2`; prints {"port": N} when listening.
 */
import { createServer as createHttp1Server } from 'node:http';
import { createServer as createHttp2Server, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';

const GRPC_HEADERS = Object.freeze({ ':status': 200, 'content-type': 'application/grpc' });
const GRPC_OK = Object.freeze({ 'grpc-status': '0', 'grpc-message': 'OK' });
const WAIT_FOR_TRAILERS = Object.freeze({ waitForTrailers: true, sendDate: false });

function answerGrpc(stream: ServerHttp2Stream): void {
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  stream.on('end', () => {
    stream.on('wantTrailers', () => stream.sendTrailers(GRPC_OK));
    stream.respond(GRPC_HEADERS, WAIT_FOR_TRAILERS);
    stream.end(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
  });
}

const kind = process.argv[2];
const server =
  kind === 'http2'
    ? createHttp2Server().on('stream', answerGrpc)
    : kind === 'http1'
      ? createHttp1Server({ keepAliveTimeout: 60_000 }, (request, response) => {
          const chunks: Buffer[] = [];
          request.on('data', (chunk: Buffer) => chunks.push(chunk));
          request.on('end', () => {
            const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
            response.writeHead(200, {
              'content-type': 'application/octet-stream',
              'inference-header-content-length': request.headers['inference-header-content-length'] ?? '0',
            });
            response.end(body);
          });
        })
      : undefined;
if (!server) throw new Error(`bare-transport-server: http1 or http2, not ${kind}`);
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })));
