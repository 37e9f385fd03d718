/**
 * Models with max_batch_size 0 receive their inputs' shapes as sent: the first dimension is
 * data, not a batch. A densenet-like [3, H, W] input and a variable-length 1-D BYTES input
 * both reached ONNX Runtime with their first dimension rewritten to 1 (500/INTERNAL).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, HttpClient } from '@batchwise/client';
import { identity } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { startTestServer } from './support/server.ts';

const IMAGE_CONFIG = `name: "image_nobatch"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3, 4, 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 3, 4, 4 ] } ]
`;
const TEXT_CONFIG = `name: "text_nobatch"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]
`;

describe('models without batching keep their first dimension', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let http: HttpClient;
  let grpc: GrpcClient;
  beforeAll(async () => {
    repo = await makeRepository([
      { name: 'image_nobatch', model: identity('FP32', [3, 4, 4], { batch: false }), config: IMAGE_CONFIG },
      { name: 'text_nobatch', model: identity('BYTES', [-1], { batch: false }), config: TEXT_CONFIG },
    ]);
    server = await startTestServer([repo.dir]);
    http = new HttpClient({ url: server.url });
    grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
  });
  afterAll(async () => {
    await http?.close();
    await grpc?.close();
    await server?.close();
    await repo?.remove();
  });

  const image = Float32Array.from({ length: 48 }, (_, i) => i * 0.5 - 3);
  const words = ['zero', '', 'two', 'drei', 'vier'];

  for (const [protocol, binary] of [
    ['HTTP binary', true],
    ['HTTP JSON', false],
    ['gRPC', undefined],
  ] as const) {
    it(`serves a [3, 4, 4] image model over ${protocol}`, async () => {
      const client = protocol === 'gRPC' ? grpc : http;
      const result = await client.infer({
        model: 'image_nobatch',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [3, 4, 4], data: image }],
        ...(binary !== undefined && { binary }),
      });
      expect(result.outputs[0]!.shape).toEqual([3, 4, 4]);
      expect(Array.from(result.outputs[0]!.data as Float32Array)).toEqual(Array.from(image));
    });

    it(`serves a variable-length BYTES model over ${protocol}, for any element count`, async () => {
      const client = protocol === 'gRPC' ? grpc : http;
      for (const count of [1, 2, 5]) {
        const result = await client.infer({
          model: 'text_nobatch',
          inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [count], data: words.slice(0, count) }],
          ...(binary !== undefined && { binary }),
        });
        expect(result.outputs[0]!.shape).toEqual([count]);
        const texts = (result.outputs[0]!.data as Uint8Array[]).map((b) => Buffer.from(b).toString());
        expect(texts).toEqual(words.slice(0, count));
      }
    });
  }

  it('serves concurrent requests of different lengths, each with its own shape', async () => {
    const results = await Promise.all(
      [3, 1, 4, 2, 5].map((count) =>
        http.infer({ model: 'text_nobatch', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [count], data: words.slice(0, count) }] }),
      ),
    );
    expect(results.map((r) => r.outputs[0]!.shape)).toEqual([[3], [1], [4], [2], [5]]);
  });
});
