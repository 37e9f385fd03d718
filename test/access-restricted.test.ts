import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchwiseClientError, GrpcClient, GrpcStatus } from '@batchwise/client';
import { EXAMPLES } from './support/repository.ts';
import { postJson, startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const INFER = {
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Array(16).fill(1) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Array(16).fill(2) },
  ],
};

describe('restricted API groups (Triton flag syntax)', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startTestServer([EXAMPLES], {
      modelControlMode: 'explicit',
      loadModels: ['simple'],
      httpRestrictedApi: ['model-repository,model-config:admin-key=s3cret', 'inference:infer-key=letmein'],
      grpcRestrictedProtocol: ['model-repository:admin-key=s3cret', 'inference:infer-key=letmein'],
    });
  });
  afterAll(() => server.close());

  const http = (path: string, headers: Record<string, string>, body?: unknown) =>
    fetch(`${server.url}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    }).then(async (r) => ({ status: r.status, text: await r.text() }));

  describe('over HTTP', () => {
    const cases: [string, string, unknown, string, string][] = [
      ['model-repository', '/v2/repository/index', {}, 'admin-key', 's3cret'],
      ['model-config', '/v2/models/simple/config', undefined, 'admin-key', 's3cret'],
      ['inference', '/v2/models/simple/infer', INFER, 'infer-key', 'letmein'],
    ];
    for (const [group, path, body, header, key] of cases) {
      it(`${group}: the right key works, a wrong or missing key gets 403 naming the header`, async () => {
        expect((await http(path, { [header]: key }, body)).status).toBe(200);
        const wrong: Record<string, string>[] = [{}, { [header]: `${key}x` }, { [header]: '' }];
        for (const headers of wrong) {
          const refused = await http(path, headers, body);
          expect(refused.status).toBe(403);
          expect(JSON.parse(refused.text).error).toBe(`This API is restricted, expecting header '${header}'`);
        }
      });
    }

    it('leaves unrestricted groups open', async () => {
      expect((await http('/v2/health/ready', {})).status).toBe(200);
      expect((await http('/v2/models/simple', {})).status).toBe(200);
      expect((await http('/v2/models/simple/stats', {})).status).toBe(200);
    });

    it('a key for one group does not open another', async () => {
      expect((await http('/v2/repository/index', { 'infer-key': 'letmein' }, {})).status).toBe(403);
    });
  });

  describe('over gRPC (header prefix triton-grpc-protocol-)', () => {
    const clients: GrpcClient[] = [];
    const client = (metadata: Record<string, string> = {}) => {
      const c = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}`, metadata });
      clients.push(c);
      return c;
    };
    afterAll(async () => {
      for (const c of clients) await c.close();
    });
    const inferWith = (c: GrpcClient) =>
      c.infer({
        model: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(2) },
        ],
      });

    it('inference: right key works; wrong or missing key is refused with UNAVAILABLE naming the header', async () => {
      const ok = await inferWith(client({ 'triton-grpc-protocol-infer-key': 'letmein' }));
      expect(Array.from(ok.outputs[0]!.data as Int32Array)).toEqual(new Array(16).fill(3));
      const refused: Record<string, string>[] = [{}, { 'triton-grpc-protocol-infer-key': 'nope' }, { 'infer-key': 'letmein' }];
      for (const metadata of refused) {
        const error = await inferWith(client(metadata)).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(BatchwiseClientError);
        expect((error as BatchwiseClientError).grpcCode).toBe(GrpcStatus.UNAVAILABLE);
        expect((error as Error).message).toContain("expecting header 'triton-grpc-protocol-infer-key'");
      }
    });

    it('model-repository: right key works, no key is refused; health stays open', async () => {
      expect(await client({ 'triton-grpc-protocol-admin-key': 's3cret' }).repositoryIndex()).toBeInstanceOf(Array);
      await expect(client().repositoryIndex()).rejects.toThrow(/triton-grpc-protocol-admin-key/);
      expect(await client().isServerReady()).toBe(true);
    });
  });
});

it('refuses to start with a malformed restriction rather than leaving the API open', async () => {
  await expect(startTestServer([EXAMPLES], { httpRestrictedApi: ['model-repository'] })).rejects.toThrow(/<api>/);
});
