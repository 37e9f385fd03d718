import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PROTO_DIR } from '@batchwise/protocol';
import { credentials, loadPackageDefinition, status, type Client, type ServiceClientConstructor, type ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient } from '@batchwise/client';
import { identity } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { startTestServer } from './support/server.ts';

type AnyClient = Client & Record<string, Function>;

/** A raw Health/Check that reports what an ALB sees: the gRPC status code and message. */
function check(health: AnyClient, service: string): Promise<{ code: number; details: string; status?: string }> {
  return new Promise((resolve) =>
    health['Check']!.call(health, { service }, (error: ServiceError | null, response?: { status: string }) =>
      resolve(error ? { code: error.code, details: error.details } : { code: status.OK, details: '', status: response!.status }),
    ),
  );
}

describe('grpc.health.v1 Check as an ALB gRPC health check sees it', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let remove: () => Promise<void>;
  let health: AnyClient;
  let client: GrpcClient;
  beforeAll(async () => {
    const repo = await makeRepository([{ name: 'good', model: identity('FP32', [4]) }]);
    remove = repo.remove;
    await mkdir(join(repo.dir, 'broken', '1'), { recursive: true });
    await writeFile(join(repo.dir, 'broken', '1', 'model.onnx'), 'not an onnx model');
    // Strict readiness (the default): one broken model keeps the server not ready.
    server = await startTestServer([repo.dir]);
    const definition = loadSync('health.proto', { keepCase: true, enums: String, defaults: true, includeDirs: [PROTO_DIR] });
    const root = loadPackageDefinition(definition) as any;
    health = new (root.grpc.health.v1.Health as ServiceClientConstructor)(
      `127.0.0.1:${server.grpcPort}`,
      credentials.createInsecure(),
    ) as AnyClient;
    client = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
  });
  afterAll(async () => {
    health?.close();
    await client?.close();
    await server?.close();
    await remove?.();
  });

  it('a not-ready server answers UNAVAILABLE (not OK), saying NOT_SERVING and which model holds it back', async () => {
    const answer = await check(health, '');
    expect(answer.code).toBe(status.UNAVAILABLE);
    expect(answer.details).toMatch(/^NOT_SERVING: the server is not ready \(broken( v1)? UNAVAILABLE\)$/);
    expect((await check(health, 'inference.GRPCInferenceService')).code).toBe(status.UNAVAILABLE);
  });

  it('models answer on their own: OK SERVING when ready, UNAVAILABLE with the load error when not, NOT_FOUND when unknown', async () => {
    expect(await check(health, 'good')).toEqual({ code: status.OK, details: '', status: 'SERVING' });
    const broken = await check(health, 'broken');
    expect(broken.code).toBe(status.UNAVAILABLE);
    expect(broken.details).toMatch(/^NOT_SERVING: model 'broken' is UNAVAILABLE: \S/);
    expect((await check(health, 'nope')).code).toBe(status.NOT_FOUND);
  });

  it('@batchwise/client reads UNAVAILABLE NOT_SERVING as NOT_SERVING', async () => {
    expect(await client.healthCheck()).toBe('NOT_SERVING');
    expect(await client.healthCheck('broken')).toBe('NOT_SERVING');
    expect(await client.healthCheck('good')).toBe('SERVING');
  });

  it('a ready server answers OK SERVING, and UNAVAILABLE as soon as shutdown clears readiness', async () => {
    const repo = await makeRepository([{ name: 'good', model: identity('FP32', [4]) }]);
    const ready = await startTestServer([repo.dir]);
    const root = loadPackageDefinition(loadSync('health.proto', { keepCase: true, enums: String, includeDirs: [PROTO_DIR] })) as any;
    const probe = new (root.grpc.health.v1.Health as ServiceClientConstructor)(
      `127.0.0.1:${ready.grpcPort}`,
      credentials.createInsecure(),
    ) as AnyClient;
    try {
      expect(await check(probe, '')).toEqual({ code: status.OK, details: '', status: 'SERVING' });
      // The grace period keeps the frontends open while load balancers notice, as on SIGTERM.
      const closing = ready.close({ graceMs: 1_000 });
      expect(await check(probe, '')).toEqual({
        code: status.UNAVAILABLE,
        details: 'NOT_SERVING: the server is not ready (starting up or shutting down)',
      });
      await closing;
    } finally {
      probe.close();
      await repo.remove();
    }
  });
});
