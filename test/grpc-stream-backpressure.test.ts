/**
 * ModelStreamInfer with a client that does not read its answers: the server must stop reading
 * requests (HTTP/2 flow control then holds the client back) instead of running every request
 * and buffering every answer in memory.
 */
import { connect, type ClientHttp2Session } from 'node:http2';
import { PROTO_DIR } from '@batchwise/protocol';
import { loadSync, type MethodDefinition } from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity } from '@batchwise/modelgen';
import { MAX_IN_FLIGHT_PER_STREAM } from '../packages/server/src/grpc/stream-infer.ts';
import { makeRepository } from './support/repository.ts';
import { getJson, startTestServer } from './support/server.ts';

const ELEMENTS = 16 * 1024; // 64 KiB per request and per answer
const REQUESTS = 3 * MAX_IN_FLIGHT_PER_STREAM;

describe('ModelStreamInfer backpressure', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let session: ClientHttp2Session;
  let method: MethodDefinition<object, { error_message: string; infer_response: { id: string } }>;
  beforeAll(async () => {
    repo = await makeRepository([
      {
        name: 'wide',
        model: identity('FP32', [ELEMENTS]),
        config: `name: "wide"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${ELEMENTS} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${ELEMENTS} ] } ]`,
      },
    ]);
    server = await startTestServer([repo.dir]);
    const definition = loadSync('grpc_service.proto', {
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
      includeDirs: [PROTO_DIR],
    });
    method = (definition['inference.GRPCInferenceService'] as Record<string, typeof method>)['ModelStreamInfer']!;
    // A bare HTTP/2 client: grpc-js's own client keeps reading (and buffering) whatever arrives.
    session = connect(`http://127.0.0.1:${server.grpcPort}`);
  });
  afterAll(async () => {
    session?.close();
    await server?.close();
    await repo?.remove();
  });

  const succeeded = async () =>
    (await getJson(`${server.url}/v2/models/wide/stats`)).model_stats[0].inference_stats.success.count as number;

  it('stops reading while answers are not read, then answers every request once the client reads', async () => {
    const call = session.request({
      ':method': 'POST',
      ':path': '/inference.GRPCInferenceService/ModelStreamInfer',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    call.pause();
    const raw = Buffer.alloc(ELEMENTS * 4);
    // Written as fast as the server takes them (waiting on 'drain' keeps this client's own
    // HTTP/2 session within its memory limit); this goes on in the background.
    void (async () => {
      for (let i = 0; i < REQUESTS; i++) {
        const message = method.requestSerialize({
          model_name: 'wide',
          id: String(i),
          inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: ['1', String(ELEMENTS)] }],
          raw_input_contents: [raw],
        });
        const header = Buffer.alloc(5);
        header.writeUInt32BE(message.length, 1);
        if (!call.write(Buffer.concat([header, message]))) await new Promise((resolve) => call.once('drain', resolve));
      }
      call.end();
    })();

    // Nothing reads the answers: wait until the server makes no more progress.
    let last = -1;
    for (let unchanged = 0; unchanged < 10;) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const now = await succeeded();
      unchanged = now === last ? unchanged + 1 : 0;
      last = now;
    }
    // Without backpressure the server reads and runs all of them and holds every answer.
    expect(last).toBeGreaterThan(0);
    expect(last).toBeLessThan(REQUESTS - MAX_IN_FLIGHT_PER_STREAM);

    const ids: string[] = [];
    const trailers = new Promise<Record<string, unknown>>((resolve) => call.once('trailers', resolve));
    let buffered = Buffer.alloc(0);
    call.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 5 && buffered.length >= 5 + buffered.readUInt32BE(1)) {
        const length = buffered.readUInt32BE(1);
        const answer = method.responseDeserialize(buffered.subarray(5, 5 + length));
        ids.push(answer.error_message === '' ? answer.infer_response.id : answer.error_message);
        buffered = buffered.subarray(5 + length);
      }
    });
    call.resume();
    expect((await trailers)['grpc-status']).toBe('0');
    expect(ids).toHaveLength(REQUESTS);
    expect(new Set(ids).size).toBe(REQUESTS);
    expect(await succeeded()).toBe(REQUESTS);
  });
});
