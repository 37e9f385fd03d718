/**
 * Rules that are not about the wire format are checked once, in core, so HTTP and gRPC refuse
 * the same request with the same message (style rule 3).
 */
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchwiseClientError, GrpcClient, GrpcStatus, HttpClient, type InferenceClient } from '@batchwise/client';
import { identity } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { startTestServer } from './support/server.ts';

const SHM_DIR = '/dev/shm';
const CONFIG = `
name: "classifier"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 5 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 5 ] label_filename: "labels.txt" } ]
`;

describe.skipIf(!existsSync(SHM_DIR))('one validation path for HTTP and gRPC', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  const key = `/batchwise_parity_${process.pid}_${Date.now()}`;
  const objectPath = join(SHM_DIR, key.slice(1));
  beforeAll(async () => {
    repo = await makeRepository([
      { name: 'classifier', model: identity('FP32', [5]), config: CONFIG, files: { 'labels.txt': 'a\nb\nc\nd\ne\n' } },
    ]);
    server = await startTestServer([repo.dir]);
  });
  afterAll(async () => {
    await server?.close();
    await repo?.remove();
    await rm(objectPath, { force: true });
  });

  it("an output asking for both classification and a shared memory region is refused with Triton's message, nothing written", async () => {
    const sentinel = Buffer.alloc(64, 0xab);
    await writeFile(objectPath, sentinel);
    const clients: [string, InferenceClient, number][] = [
      ['http', new HttpClient({ url: server.url }), 400],
      ['grpc', new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` }), GrpcStatus.INVALID_ARGUMENT],
    ];
    try {
      await clients[0]![1].registerSystemSharedMemory('out', key, 64);
      for (const [label, client, code] of clients) {
        const error = await client
          .infer({
            model: 'classifier',
            inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 5], data: Float32Array.of(0.1, 0.5, 0.2, 0.1, 0.1) }],
            outputs: [{ name: 'OUTPUT0', parameters: { classification: 2 }, sharedMemory: { region: 'out', byteSize: 64 } }],
          })
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(error, label).toBeInstanceOf(BatchwiseClientError);
        const e = error as BatchwiseClientError;
        expect(e.message, label).toBe("output 'OUTPUT0': Output can't set both 'shared_memory_region' and 'classification'");
        expect(label === 'http' ? e.httpStatus : e.grpcCode, label).toBe(code);
        expect(await readFile(objectPath), label).toEqual(sentinel);
      }
      // Each on its own still works on both protocols.
      for (const [label, client] of clients) {
        const r = await client.infer({
          model: 'classifier',
          inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 5], data: Float32Array.of(0.1, 0.5, 0.2, 0.1, 0.1) }],
          outputs: [{ name: 'OUTPUT0', parameters: { classification: 1 } }],
        });
        expect(
          (r.outputs[0]!.data as Uint8Array[]).map((b) => Buffer.from(b).toString()),
          label,
        ).toEqual(['0.500000:1:b']);
      }
    } finally {
      await clients[0]![1].unregisterSystemSharedMemory();
      await Promise.all(clients.map(([, c]) => c.close()));
    }
  });
});
