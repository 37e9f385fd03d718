/**
 * A lean gRPC load client in the spirit of perf_analyzer's C++ one: ModelInfer over
 * node:http2 with the request encoded once, so the measurement is the server's gRPC cost and
 * not the grpc-js client's (which costs about three times undici's per request on these cores).
 * Every response is still read whole, its gRPC status checked and its message decoded.
 */
import { connect, type ClientHttp2Session } from 'node:http2';
import { basename, join } from 'node:path';
import protobuf from 'protobufjs';
import { DEFAULT_PROTO_DIR } from '@batchwise/client';
import type { SendRequest } from '@batchwise/client/load';

const PATH = '/inference.GRPCInferenceService/ModelInfer';

let messages: { request: protobuf.Type; response: protobuf.Type } | undefined;

function loadMessages(): { request: protobuf.Type; response: protobuf.Type } {
  if (messages) return messages;
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(DEFAULT_PROTO_DIR, basename(target));
  root.loadSync('grpc_service.proto', { keepCase: true });
  messages = { request: root.lookupType('inference.ModelInferRequest'), response: root.lookupType('inference.ModelInferResponse') };
  return messages;
}

/** One FP32 sample of `width` floats as a length-prefixed gRPC message, encoded once. */
export function encodeFp32InferRequest(model: string, width: number, data: Float32Array): Buffer {
  const { request } = loadMessages();
  const body = request
    .encode(
      request.fromObject({
        model_name: model,
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, width] }],
        raw_input_contents: [Buffer.from(data.buffer, data.byteOffset, data.byteLength)],
      }),
    )
    .finish();
  const framed = Buffer.alloc(5 + body.length);
  framed.writeUInt8(0, 0); // not compressed
  framed.writeUInt32BE(body.length, 1);
  framed.set(body, 5);
  return framed;
}

/** Sends the pre-encoded request over `connections` HTTP/2 sessions in turn. */
export function rawGrpcInfer(address: string, framedRequest: Buffer, connections: number): { send: SendRequest; close(): Promise<void> } {
  const { response } = loadMessages();
  const sessions: ClientHttp2Session[] = Array.from({ length: connections }, () => connect(`http://${address}`));
  for (const s of sessions) s.on('error', () => undefined); // surfaced per request
  let next = 0;
  const send: SendRequest = () =>
    new Promise((resolve, reject) => {
      const stream = sessions[next++ % sessions.length]!.request({
        ':method': 'POST',
        ':path': PATH,
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      const chunks: Buffer[] = [];
      let grpcStatus: string | undefined;
      let grpcMessage = '';
      const readStatus = (headers: Record<string, unknown>) => {
        if (headers['grpc-status'] !== undefined) grpcStatus = String(headers['grpc-status']);
        if (headers['grpc-message'] !== undefined) grpcMessage = decodeURIComponent(String(headers['grpc-message']));
      };
      stream.on('response', readStatus); // trailers-only errors
      stream.on('trailers', readStatus);
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', reject);
      stream.on('end', () => {
        if (grpcStatus !== '0') return reject(new Error(`gRPC status ${grpcStatus ?? 'missing'}: ${grpcMessage}`));
        const body = Buffer.concat(chunks);
        if (body.length < 5 || body.readUInt32BE(1) !== body.length - 5)
          return reject(new Error(`malformed gRPC message of ${body.length} bytes`));
        const decoded = response.decode(body.subarray(5)) as unknown as { raw_output_contents: Uint8Array[] };
        if (decoded.raw_output_contents.length !== 1)
          return reject(new Error(`expected 1 output, got ${decoded.raw_output_contents.length}`));
        resolve();
      });
      stream.end(framedRequest);
    });
  return {
    send,
    close: async () => {
      await Promise.all(sessions.map((s) => new Promise<void>((r) => s.close(() => r()))));
    },
  };
}
