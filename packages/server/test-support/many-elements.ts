import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:http2';
import protobuf from 'protobufjs';
import { GrpcClient, HttpClient } from '@batchwise/client';
import { identity, type IModelProto } from '@batchwise/modelgen';

/**
 * Requests that are small on the wire and huge once decoded: tens of millions of tiny elements,
 * as a hostile client would send them (issue 21). Built as bytes, so that the client holds one
 * buffer per request and never an object per element. Shared by bench's many-elements scenario
 * and test/many-elements.test.ts.
 */

/** What V8 may add beyond the accounted bytes (README: the young generation's 32 MiB and 64 MiB of uncollected Buffers). */
export const RUNTIME_RESERVE_BYTES = 96 * 2 ** 20;

/** A BYTES element of one byte as bytes_contents carries it: tag (field 8, length-delimited), length 1, the byte. */
const BYTES_ELEMENT = [0x42, 0x01, 0x61];

/** ModelInferRequest for `model` with one BYTES input [1, elements] in typed contents, every element one byte. */
export function bytesContentsMessage(model: string, input: string, elements: number): Buffer {
  const contents = Buffer.alloc(elements * BYTES_ELEMENT.length);
  for (let i = 0; i < contents.length; i += 3) {
    contents[i] = BYTES_ELEMENT[0]!;
    contents[i + 1] = BYTES_ELEMENT[1]!;
    contents[i + 2] = BYTES_ELEMENT[2]!;
  }
  const tensor = protobuf.Writer.create()
    .uint32((1 << 3) | 2)
    .string(input)
    .uint32((2 << 3) | 2)
    .string('BYTES')
    .uint32((3 << 3) | 2)
    .fork()
    .int64(1)
    .int64(elements)
    .ldelim()
    .uint32((5 << 3) | 2)
    .bytes(contents)
    .finish();
  return Buffer.from(
    protobuf.Writer.create()
      .uint32((1 << 3) | 2)
      .string(model)
      .uint32((5 << 3) | 2)
      .bytes(tensor)
      .finish(),
  );
}

/** A JSON infer body whose one input holds `elements` copies of `element` (JSON text), in `shape`. */
export function jsonBody(input: string, datatype: string, shape: readonly number[], element: string, elements: number): Buffer {
  const head = `{"inputs":[{"name":"${input}","datatype":"${datatype}","shape":[${shape.join(',')}],"data":[`;
  return Buffer.concat([Buffer.from(head), Buffer.from(`${element},`.repeat(elements - 1)), Buffer.from(`${element}]}]}`)]);
}

/** A binary-extension body (JSON header, then the tensor): one BYTES input of `elements` one-byte elements. */
export function binaryBytesBody(input: string, elements: number): { body: Buffer; headerLength: number } {
  const data = Buffer.alloc(elements * 5);
  for (let i = 0; i < data.length; i += 5) {
    data[i] = 1;
    data[i + 4] = 0x61;
  }
  const header = Buffer.from(
    JSON.stringify({ inputs: [{ name: input, datatype: 'BYTES', shape: [1, elements], parameters: { binary_data_size: data.length } }] }),
  );
  return { body: Buffer.concat([header, data]), headerLength: header.length };
}

export interface Outcome {
  /** HTTP status, or the gRPC status code (0: OK); undefined when the connection failed first. */
  readonly code: number | undefined;
  readonly message: string;
  /** From the request's last byte written (or its start, when the answer came first) to the answer, ms. */
  readonly ms: number;
}

/** Times an answer from when the request was written whole; an answer that came before counts from the start. */
function answerClock(): { sent(): void; elapsed(): number } {
  const started = performance.now();
  let sentAt: number | undefined;
  return {
    sent: () => void (sentAt ??= performance.now()),
    elapsed: () => performance.now() - (sentAt ?? started),
  };
}

/** Sends an already-encoded ModelInfer message over node:http2 (no object per element on this side either). */
export async function sendInferMessage(address: string, message: Buffer): Promise<Outcome> {
  const session = connect(`http://${address}`);
  session.on('error', () => undefined); // surfaced by the stream
  const clock = answerClock();
  try {
    return await new Promise<Outcome>((resolve) => {
      const stream = session.request({
        ':method': 'POST',
        ':path': '/inference.GRPCInferenceService/ModelInfer',
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      let code: number | undefined;
      let text = '';
      let ms = 0;
      const readStatus = (headers: Record<string, unknown>) => {
        if (headers['grpc-status'] === undefined) return;
        code = Number(headers['grpc-status']);
        text = decodeURIComponent(String(headers['grpc-message'] ?? ''));
        ms = clock.elapsed();
      };
      stream.on('response', readStatus); // a trailers-only answer
      stream.on('trailers', readStatus);
      stream.on('data', () => undefined);
      stream.on('finish', clock.sent);
      stream.on('close', () => resolve({ code, message: text, ms: code === undefined ? clock.elapsed() : ms }));
      stream.on('error', () => undefined); // a reset ends with 'close' and no status
      const frame = Buffer.alloc(5);
      frame.writeUInt32BE(message.length, 1);
      stream.write(frame);
      stream.end(message);
    });
  } finally {
    session.close();
  }
}

/** POSTs a body; a server that answers while the body is still being sent may reset the connection instead. */
export function post(url: string, body: Buffer, headers: Record<string, string>): Promise<Outcome> {
  const clock = answerClock();
  return new Promise((resolve) => {
    const request = httpRequest(url, { method: 'POST', headers: { ...headers, 'content-length': String(body.length) } }, (response) => {
      const ms = clock.elapsed();
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ code: response.statusCode, message: Buffer.concat(chunks).toString(), ms }));
      response.on('error', (error) => resolve({ code: response.statusCode, message: String(error), ms }));
    });
    request.on('finish', clock.sent);
    request.on('error', (error) => resolve({ code: undefined, message: String(error), ms: clock.elapsed() }));
    request.end(body);
  });
}

/** Resident memory of a process now and at its peak (VmRSS, VmHWM from /proc/<pid>/status), bytes. */
export function residentBytes(pid: number): { now: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { now: kib('VmRSS'), peak: kib('VmHWM') };
}

/**
 * The identity models the many-element requests go to: text (BYTES, batching up to 8), vector
 * (FP32 of any length, batching up to 8) and rows (any number of one-element FP32 rows in one
 * request: no batching, the first dim is the model's own).
 */
export const MANY_ELEMENTS_MODELS: readonly { readonly name: string; readonly config: string; readonly model: () => IModelProto }[] = [
  { name: 'text', model: () => identity('STRING', [-1]), config: identityConfig('text', 8, 'TYPE_STRING', [-1]) },
  { name: 'vector', model: () => identity('FP32', [-1]), config: identityConfig('vector', 8, 'TYPE_FP32', [-1]) },
  { name: 'rows', model: () => identity('FP32', [-1, 1], { batch: false }), config: identityConfig('rows', 0, 'TYPE_FP32', [-1, 1]) },
];

function identityConfig(name: string, maxBatchSize: number, type: string, dims: readonly number[]): string {
  const tensor = (tensorName: string) => `{ name: "${tensorName}" data_type: ${type} dims: [ ${dims.join(', ')} ] }`;
  return `name: "${name}"\nmax_batch_size: ${maxBatchSize}\ninput [ ${tensor('INPUT0')} ]\noutput [ ${tensor('OUTPUT0')} ]`;
}

export interface Bystander {
  /** Stops, and tells how its requests went and how often the server was not ready. */
  stop(): Promise<{ ok: number; failed: string[]; notReady: number }>;
}

/** Another client: a small request to `vector` over HTTP and gRPC by turns, and a readiness check, every 20 ms until stopped. */
export function startBystander(httpUrl: string, grpcAddress: string): Bystander {
  const http = new HttpClient({ url: httpUrl });
  const grpc = new GrpcClient({ url: grpcAddress });
  const data = new Float32Array(16).fill(0.5);
  const request = { model: 'vector', inputs: [{ name: 'INPUT0', datatype: 'FP32' as const, shape: [1, 16], data }] };
  let running = true;
  const tally = { ok: 0, failed: [] as string[], notReady: 0 };
  const loop = (async () => {
    for (let i = 0; running; i++) {
      try {
        await (i % 2 === 0 ? http : grpc).infer(request);
        tally.ok++;
        if ((await fetch(`${httpUrl}/v2/health/ready`)).status !== 200) tally.notReady++;
      } catch (error) {
        tally.failed.push((error as Error).message);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      await http.close();
      await grpc.close();
      return tally;
    },
  };
}
