/**
 * Differential test of the hand-written gRPC transport (issue 44): random valid requests, sent as raw
 * HTTP/2 the way clients may send them (a message cut across DATA frames anywhere, prefix included;
 * several messages of a ModelStreamInfer stream in one frame; gzip or deflate), must be answered as
 * ONNX Runtime run in-process answers them, bit for bit, or refused with an error naming what ONNX
 * Runtime cannot take. test/differential.test.ts sends the same kind of requests through grpc-js and
 * the other transports; this one exercises the framing and compression paths no client library takes.
 *
 *   DIFFERENTIAL_RUNS=100 DIFFERENTIAL_SEED=7 npx vitest run test/grpc-transport-differential.test.ts
 */
import { connect, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deserializeBytes, serializeBytes } from '@batchwise/client';
import { TYPED_ARRAY_OF } from '@batchwise/protocol';
import { serializeModel } from '@batchwise/modelgen';
import { loadGrpcServiceRoot, PROTO_LOADER_OPTIONS } from '../packages/server/src/grpc/protos.ts';
import {
  configText,
  differences,
  expectedRefusal,
  onnxModel,
  Reference,
  requestArbitrary,
  variableDims,
  type DiffRequest,
  type Elements,
  type ModelSpec,
  type TensorValue,
  type Wire,
} from './support/differential.ts';
import { serveModels, type ServedModels } from './support/server.ts';

const RUNS = Number(process.env['DIFFERENTIAL_RUNS'] ?? 12);
const SEED = Number(process.env['DIFFERENTIAL_SEED'] ?? 44);
const WIRE: Wire = { fp16: true, floats: 'bits', bytes: 'any' };

const MODELS: readonly ModelSpec[] = [
  {
    name: 'mixed',
    maxBatchSize: 8,
    inputs: [
      { name: 'X', datatype: 'FP32', dims: [3] },
      { name: 'N', datatype: 'INT64', dims: [-1] },
      { name: 'S', datatype: 'BYTES', dims: [2] },
      { name: 'H', datatype: 'FP16', dims: [-1] },
    ],
    outputs: [
      { name: 'NEG', datatype: 'FP32', dims: [3] },
      { name: 'TWICE', datatype: 'INT64', dims: [-1] },
      { name: 'SAME', datatype: 'BYTES', dims: [2] },
      { name: 'HALF', datatype: 'FP16', dims: [-1] },
    ],
    graph: (g) => {
      g.op('Neg', ['X'], 'NEG');
      g.op('Add', ['N', 'N'], 'TWICE');
      g.op('Identity', ['S'], 'SAME');
      g.op('Identity', ['H'], 'HALF');
    },
  },
  {
    name: 'nobatch',
    maxBatchSize: 0,
    inputs: [{ name: 'U', datatype: 'UINT8', dims: [-1, 2] }],
    outputs: [{ name: 'V', datatype: 'UINT8', dims: [-1, 2] }],
    graph: (g) => g.op('Identity', ['U'], 'V'),
  },
];

const root = loadGrpcServiceRoot();
const requestType = root.lookupType('inference.ModelInferRequest');
const responseType = root.lookupType('inference.ModelInferResponse');
const streamResponseType = root.lookupType('inference.ModelStreamInferResponse');

type Compression = 'identity' | 'gzip' | 'deflate';

/** How a call goes on the wire: compression, and where its bytes are cut into DATA frames. */
interface Sending {
  readonly compression: Compression;
  readonly cuts: readonly number[];
}

function rawOf(t: TensorValue): Uint8Array {
  if (t.datatype === 'BYTES') return serializeBytes(t.data as Uint8Array[]);
  const data = t.data as Exclude<Elements, Uint8Array[]>;
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

function requestBytes(request: DiffRequest, id: string): Uint8Array {
  return requestType
    .encode(
      requestType.fromObject({
        model_name: request.model,
        id,
        inputs: request.inputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape })),
        outputs: (request.outputs ?? []).map((name) => ({ name })),
        raw_input_contents: request.inputs.map(rawOf),
      }),
    )
    .finish();
}

function framed(message: Uint8Array, compression: Compression): Buffer {
  const body = compression === 'gzip' ? gzipSync(message) : compression === 'deflate' ? deflateSync(message) : Buffer.from(message);
  const prefix = Buffer.alloc(5);
  prefix[0] = compression === 'identity' ? 0 : 1;
  prefix.writeUInt32BE(body.length, 1);
  return Buffer.concat([prefix, body]);
}

interface ResponseObject {
  id: string;
  outputs: { name: string; datatype: string; shape: string[] }[];
  raw_output_contents: Buffer[];
}

function outputsOf(response: ResponseObject): TensorValue[] {
  return response.outputs.map((o, i) => {
    const datatype = o.datatype as TensorValue['datatype'];
    const bytes = response.raw_output_contents[i]!;
    const data = datatype === 'BYTES' ? deserializeBytes(datatype, bytes) : new TYPED_ARRAY_OF[datatype](Uint8Array.from(bytes).buffer);
    return { name: o.name, datatype, shape: o.shape.map(Number), data: data as Elements };
  });
}

/** The messages of a response body. */
function messagesOf(data: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < data.length; at += 5 + data.readUInt32BE(at + 1))
    out.push(data.subarray(at + 5, at + 5 + data.readUInt32BE(at + 1)));
  return out;
}

/** Writes `wire` cut at `cuts`, each piece its own DATA frame (the next written once the last has left), then ends. */
async function send(stream: ClientHttp2Stream, wire: Buffer, cuts: readonly number[]): Promise<void> {
  const points = [...new Set(cuts.map((c) => c % wire.length))].filter((c) => c > 0).sort((a, b) => a - b);
  let last = 0;
  for (const p of points) {
    await new Promise<void>((resolve, reject) => stream.write(wire.subarray(last, p), (e) => (e ? reject(e) : resolve())));
    await new Promise((resolve) => setTimeout(resolve, 2));
    last = p;
  }
  stream.end(wire.subarray(last));
}

function call(session: ClientHttp2Session, method: string, compression: Compression) {
  const stream = session.request({
    ':method': 'POST',
    ':path': `/inference.GRPCInferenceService/${method}`,
    'content-type': 'application/grpc',
    te: 'trailers',
    ...(compression !== 'identity' && { 'grpc-encoding': compression }),
  });
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise<{ status: string; message: string; data: Buffer }>((resolve, reject) => {
    let status = '';
    let message = '';
    const take = (h: Record<string, unknown>) => {
      if (h['grpc-status'] !== undefined) {
        status = String(h['grpc-status']);
        message = decodeURIComponent(String(h['grpc-message'] ?? ''));
      }
    };
    stream.on('response', take);
    stream.on('trailers', take);
    stream.on('error', reject);
    stream.on('close', () => resolve({ status, message, data: Buffer.concat(chunks) }));
  });
  return { stream, done };
}

/** What the server said of one request: its outputs, or the error that names why it refused it. */
type Answer = { outputs: TensorValue[] } | { error: string };

describe('the gRPC transport answers as ONNX Runtime in-process does (differential, raw HTTP/2)', () => {
  let served: ServedModels;
  let session: ClientHttp2Session;
  const references = new Map<string, Reference>();

  beforeAll(async () => {
    served = await serveModels(MODELS.map((spec) => ({ name: spec.name, model: onnxModel(spec), config: configText(spec) })));
    for (const spec of MODELS) references.set(spec.name, await Reference.create(spec, serializeModel(onnxModel(spec))));
    session = connect(`http://127.0.0.1:${served.server.grpcPort}`);
  });
  afterAll(async () => {
    session?.close();
    await served?.close();
    await Promise.all([...references.values()].map((r) => r.release()));
  });

  async function check(request: DiffRequest, answer: Answer): Promise<void> {
    const refusal = expectedRefusal(request);
    if ('error' in answer) {
      if (!refusal) throw new Error(`a valid request was refused: ${answer.error}`);
      expect(answer.error).toMatch(refusal);
      return;
    }
    if (refusal) throw new Error(`served a request ONNX Runtime cannot take (expected an error naming ${refusal})`);
    const problems = differences(await references.get(request.model)!.run(request), answer.outputs, WIRE);
    if (problems.length > 0) throw new Error(`${request.model}: ${problems.join('; ')}`);
  }

  const sending: fc.Arbitrary<Sending> = fc.record({
    compression: fc.constantFrom<Compression>('identity', 'gzip', 'deflate'),
    cuts: fc.array(fc.nat(), { maxLength: 4 }),
  });

  for (const spec of MODELS) {
    const requests = variableDims(spec).chain((dims) => requestArbitrary(spec, WIRE, dims));

    it(`${spec.name}: ModelInfer, its message cut anywhere, compressed or not`, async () => {
      await fc.assert(
        fc.asyncProperty(requests, sending, async (request, how) => {
          const { stream, done } = call(session, 'ModelInfer', how.compression);
          await send(stream, framed(requestBytes(request, 'u'), how.compression), how.cuts);
          const { status, message, data } = await done;
          const answer: Answer =
            status === '0'
              ? {
                  outputs: outputsOf(
                    responseType.toObject(responseType.decode(messagesOf(data)[0]!), PROTO_LOADER_OPTIONS) as ResponseObject,
                  ),
                }
              : { error: `gRPC ${status}: ${message}` };
          await check(request, answer);
        }),
        { numRuns: RUNS, seed: SEED },
      );
    }, 120_000);

    it(`${spec.name}: ModelStreamInfer, several requests per DATA frame or cut anywhere`, async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(requests, { minLength: 1, maxLength: 4 }), sending, async (batch, how) => {
          const { stream, done } = call(session, 'ModelStreamInfer', how.compression);
          const wire = Buffer.concat(batch.map((request, i) => framed(requestBytes(request, String(i)), how.compression)));
          await send(stream, wire, how.cuts);
          const { status, message, data } = await done;
          expect(`${status} ${message}`).toBe('0 OK');
          const answers = new Map<string, Answer>();
          for (const bytes of messagesOf(data)) {
            const r = streamResponseType.toObject(streamResponseType.decode(bytes), PROTO_LOADER_OPTIONS) as {
              error_message: string;
              infer_response: ResponseObject;
            };
            answers.set(
              r.infer_response.id,
              r.error_message === '' ? { outputs: outputsOf(r.infer_response) } : { error: r.error_message },
            );
          }
          expect([...answers.keys()].sort()).toEqual(batch.map((_, i) => String(i)));
          for (const [i, request] of batch.entries()) await check(request, answers.get(String(i))!);
        }),
        { numRuns: RUNS, seed: SEED },
      );
    }, 120_000);
  }
});
