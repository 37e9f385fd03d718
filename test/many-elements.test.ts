/**
 * Issue 21's proof: requests that are modest on the wire but hold tens of millions of tiny
 * elements, against the real CLI in a child process with a small memory budget (so its resident
 * memory can be read from /proc). Each is refused before it is decoded, or served; the server
 * stays ready, another client's requests keep succeeding, and resident memory stays within the
 * budget plus the runtime reserve.
 */
import { connect } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadGrpcServiceRoot } from '../packages/server/src/grpc/protos.ts';
import {
  binaryBytesBody,
  bytesContentsMessage,
  jsonBody,
  MANY_ELEMENTS_MODELS,
  post,
  residentBytes,
  RUNTIME_RESERVE_BYTES,
  sendInferMessage,
  startBystander,
  type Bystander,
  type Outcome,
} from '@batchwise/server/test-support/many-elements.ts';
import { startChildServer, type ChildServer } from './support/child-server.ts';
import { EXAMPLES, makeRepository } from './support/repository.ts';
import { startTestServer } from './support/server.ts';
import { encodeInferRequest } from '@batchwise/server/test-support/grpc-wire.ts';

const MiB = 2 ** 20;
const BUDGET = 1024 * MiB;
const M = 1_000_000;

const JSON_HEADERS = { 'content-type': 'application/json' };

describe('tens of millions of tiny elements, against a server with a 1 GiB budget', () => {
  let server: ChildServer;
  let grpcAddress: string;
  let pid: number;
  /** Another client's small requests, HTTP and gRPC by turns, all along. */
  let bystander: Bystander;
  let removeRepository: () => Promise<void>;

  beforeAll(async () => {
    const repo = await makeRepository(MANY_ELEMENTS_MODELS.map((m) => ({ name: m.name, model: m.model(), config: m.config })));
    removeRepository = repo.remove;
    // Above every request here: the limit's own refusals are checked below, on a server of their own.
    server = await startChildServer([
      '--model-repository',
      repo.dir,
      '--memory-limit',
      String(BUDGET),
      '--max-request-elements',
      String(25 * M),
    ]);
    pid = server.process.pid!;
    grpcAddress = server.grpcAddress;
    bystander = startBystander(server.url, grpcAddress);
  });
  afterAll(async () => {
    server?.process.kill('SIGTERM');
    await server?.exited;
    await removeRepository?.();
  });

  const refusedInTime = (outcome: Outcome, codes: readonly number[]) => {
    expect(codes, outcome.message).toContain(outcome.code);
    expect(outcome.message).toMatch(/\d+ (BYTES )?elements|\d+ values|memory budget/);
    expect(outcome.ms, 'refused within a second of the last byte sent').toBeLessThan(1000);
  };
  const HTTP_REFUSED = [400, 503];
  const GRPC_REFUSED = [3, 8]; // INVALID_ARGUMENT, RESOURCE_EXHAUSTED

  it('gRPC: 20 million one-byte BYTES elements in typed contents (60 MB) are refused before they are decoded', async () => {
    refusedInTime(await sendInferMessage(grpcAddress, bytesContentsMessage('text', 'INPUT0', 20 * M)), GRPC_REFUSED);
  });

  it('HTTP JSON: 20 million one-character strings for a BYTES input (80 MB) are refused unparsed', async () => {
    refusedInTime(
      await post(`${server.url}/v2/models/text/infer`, jsonBody('INPUT0', 'BYTES', [1, 20 * M], '"a"', 20 * M), JSON_HEADERS),
      HTTP_REFUSED,
    );
  });

  it('HTTP binary: 20 million one-byte BYTES elements (100 MB) are refused before any string exists', async () => {
    const { body, headerLength } = binaryBytesBody('INPUT0', 20 * M);
    const headers = { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(headerLength) };
    refusedInTime(await post(`${server.url}/v2/models/text/infer`, body, headers), HTTP_REFUSED);
  });

  it('HTTP JSON: 20 million numbers for an FP32 input (40 MB) are refused unparsed', async () => {
    refusedInTime(
      await post(`${server.url}/v2/models/vector/infer`, jsonBody('INPUT0', 'FP32', [1, 20 * M], '1', 20 * M), JSON_HEADERS),
      HTTP_REFUSED,
    );
  });

  it('deeply batched tiny elements: a million one-element rows are served, five million refused', async () => {
    const served = await post(`${server.url}/v2/models/rows/infer`, jsonBody('INPUT0', 'FP32', [M, 1], '[0.5]', M), JSON_HEADERS);
    expect(served.code, served.message.slice(0, 300)).toBe(200);
    expect(JSON.parse(served.message).outputs[0].shape).toEqual([M, 1]);
    refusedInTime(
      await post(`${server.url}/v2/models/rows/infer`, jsonBody('INPUT0', 'FP32', [5 * M, 1], '[0.5]', 5 * M), JSON_HEADERS),
      HTTP_REFUSED,
    );
  });

  it('ModelStreamInfer: the same 20M-element message is answered with its refusal on the stream, which goes on', async () => {
    const answers = await streamInfer(grpcAddress, [
      bytesContentsMessage('text', 'INPUT0', 20 * M),
      bytesContentsMessage('text', 'INPUT0', 1000),
    ]);
    expect(answers).toHaveLength(2);
    expect(answers.map((a) => a.error_message)).toEqual([expect.stringMatching(/20000000 BYTES elements/), '']);
  });

  it('a BYTES request within the room of a model instance is served over gRPC', async () => {
    expect(await sendInferMessage(grpcAddress, bytesContentsMessage('text', 'INPUT0', 200_000))).toMatchObject({ code: 0 });
  });

  it('all along: the server stayed ready, the other client never failed, resident memory stayed within the budget and reserve', async () => {
    const { ok, failed, notReady } = await bystander.stop();
    expect(failed).toEqual([]);
    expect(ok).toBeGreaterThan(10);
    expect(notReady).toBe(0);
    expect(residentBytes(pid).peak).toBeLessThan(BUDGET + RUNTIME_RESERVE_BYTES);
  });
});

describe('--max-request-elements and what a model takes', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let removeRepository: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository(MANY_ELEMENTS_MODELS.map((m) => ({ name: m.name, model: m.model(), config: m.config })));
    removeRepository = repo.remove;
    server = await startTestServer([EXAMPLES, repo.dir], { maxRequestElements: 1000 });
  });
  afterAll(async () => {
    await server?.close();
    await removeRepository?.();
  });

  const LIMIT = /has 2000 tensor elements; at most 1000 are allowed per request \(--max-request-elements\)/;

  it('more elements than the limit: 400 / INVALID_ARGUMENT naming both, over HTTP JSON, HTTP binary and gRPC typed contents', async () => {
    const json = await post(`${server.url}/v2/models/vector/infer`, jsonBody('INPUT0', 'FP32', [1, 2000], '1', 2000), JSON_HEADERS);
    expect(json.code).toBe(400);
    // The body's values in arrays: the shape's two and the data's 2000.
    expect(json.message).toMatch(/has 2002 tensor elements; at most 1000 are allowed per request \(--max-request-elements\)/);
    const floats = Buffer.alloc(8000);
    const header = Buffer.from(
      JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2000], parameters: { binary_data_size: 8000 } }] }),
    );
    const binary = await post(`${server.url}/v2/models/vector/infer`, Buffer.concat([header, floats]), {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': String(header.length),
    });
    expect([binary.code, binary.message]).toEqual([400, expect.stringMatching(LIMIT)]);
    const grpc = await sendInferMessage(`127.0.0.1:${server.grpcPort}`, bytesContentsMessage('text', 'INPUT0', 2000));
    expect([grpc.code, grpc.message]).toEqual([3, expect.stringMatching(LIMIT)]);
  });

  it('typed contents with more elements than an input of fixed dims takes: INVALID_ARGUMENT before decoding', async () => {
    const message = encodeInferRequest({
      model_name: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], contents: { int_contents: new Array(500).fill(1) } },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], contents: { int_contents: new Array(16).fill(1) } },
      ],
    });
    const answer = await sendInferMessage(`127.0.0.1:${server.grpcPort}`, message);
    expect([answer.code, answer.message]).toEqual([
      3,
      "input 'INPUT0' has 500 elements, but model 'simple' takes at most 128 (max_batch_size 8 x [16])",
    ]);
  });
});

/** Sends encoded ModelInferRequests on one ModelStreamInfer call and returns every answer once the server ends it. */
async function streamInfer(address: string, messages: readonly Buffer[]): Promise<{ error_message: string }[]> {
  const type = loadGrpcServiceRoot().lookupType('inference.ModelStreamInferResponse');
  const session = connect(`http://${address}`);
  try {
    const body = await new Promise<Buffer>((resolve, reject) => {
      const stream = session.request({
        ':method': 'POST',
        ':path': '/inference.GRPCInferenceService/ModelStreamInfer',
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => resolve(Buffer.concat(chunks)));
      stream.on('error', reject);
      for (const message of messages) {
        const frame = Buffer.alloc(5);
        frame.writeUInt32BE(message.length, 1);
        stream.write(frame);
        stream.write(message);
      }
      stream.end();
    });
    const answers: { error_message: string }[] = [];
    for (let at = 0; at < body.length; at += 5 + body.readUInt32BE(at + 1)) {
      answers.push(
        type.toObject(type.decode(body.subarray(at + 5, at + 5 + body.readUInt32BE(at + 1))), { defaults: true }) as {
          error_message: string;
        },
      );
    }
    return answers;
  } finally {
    session.close();
  }
}
