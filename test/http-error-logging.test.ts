/**
 * HTTP logs a failed request as grpc/unary.ts logs a failed call: INTERNAL at error level with
 * the route, client errors at debug level only. The INTERNAL error is real: ONNX Runtime fails a
 * run whose input cannot be reshaped, and the server stays up.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BATCH_DIM, GraphBuilder } from '@batchwise/modelgen';
import { postJson, serveModels, type ServedModels } from './support/server.ts';

/** [batch, n] -> [batch, n/2, 2]: ONNX Runtime fails the run when n is odd. */
function pairsModel() {
  const g = new GraphBuilder('pairs');
  g.input('INPUT0', 'FP32', [BATCH_DIM, 'n']);
  g.initializer('pair_shape', 'INT64', [3], BigInt64Array.from([0n, -1n, 2n]));
  g.op('Reshape', ['INPUT0', 'pair_shape'], 'OUTPUT0');
  g.output('OUTPUT0', 'FP32', [BATCH_DIM, 'half', 2]);
  return g.build();
}
const config = `name: "pairs"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, 2 ] } ]
`;

describe('HTTP error logging on a real server', () => {
  const lines: Record<string, unknown>[] = [];
  let served: ServedModels;
  beforeAll(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    served = await serveModels([{ name: 'pairs', model: pairsModel(), config }], { logger: pino({ level: 'debug' }, sink) });
  });
  afterAll(() => served?.close());

  const infer = (values: number[]) =>
    postJson(`${served.server.url}/v2/models/pairs/infer`, {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, values.length], data: values }],
    });
  const failures = () => lines.filter((l) => l['msg'] === 'HTTP request failed');

  it('logs an INTERNAL error from ONNX Runtime at error level with the route and the message, and keeps serving', async () => {
    expect((await infer([1, 2, 3, 4])).status).toBe(200);
    const failed = await infer([1, 2, 3]);
    expect(failed.status).toBe(500);
    expect(failures()).toEqual([
      expect.objectContaining({ level: 50, method: 'POST', url: '/v2/models/pairs/infer', code: 'INTERNAL', err: failed.json.error }),
    ]);
    expect((await infer([5, 6])).json.outputs[0].data).toEqual([5, 6]);
  });

  it('logs a client error at debug level only', async () => {
    lines.length = 0;
    expect((await postJson(`${served.server.url}/v2/models/nope/infer`, { inputs: [] })).status).toBe(400);
    expect(failures()).toEqual([expect.objectContaining({ level: 20, code: 'INVALID_ARG' })]);
  });
});
