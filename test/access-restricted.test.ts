import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, loadPackageDefinition, Metadata } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { BatchwiseClientError, DEFAULT_PROTO_DIR, GrpcClient, GrpcStatus } from '@batchwise/client';
import { startChildServer } from './support/child-server.ts';
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

describe('every restricted group, table-driven', () => {
  const GROUPS = [
    'health',
    'metadata',
    'inference',
    'shared-memory',
    'model-config',
    'model-repository',
    'statistics',
    'trace',
    'logging',
  ] as const;
  type Group = (typeof GROUPS)[number];
  const header = (group: Group) => `${group}-key`;
  const secret = (group: Group) => `${group}-secret`;
  let server: Server;
  let grpc: any;
  beforeAll(async () => {
    const specs = GROUPS.map((g) => `${g}:${header(g)}=${secret(g)}`);
    server = await startTestServer([EXAMPLES], {
      modelControlMode: 'explicit',
      loadModels: ['simple'],
      httpRestrictedApi: specs,
      grpcRestrictedProtocol: specs,
    });
    const definition = loadSync(['grpc_service.proto'], {
      keepCase: true,
      longs: Number,
      enums: String,
      defaults: true,
      oneofs: true,
      includeDirs: [DEFAULT_PROTO_DIR],
    });
    const root = loadPackageDefinition(definition) as any;
    grpc = new root.inference.GRPCInferenceService(`127.0.0.1:${server.grpcPort}`, credentials.createInsecure());
  });
  afterAll(async () => {
    grpc?.close();
    await server.close();
  });

  const HTTP: Record<Group, [method: 'GET' | 'POST', path: string, body?: unknown]> = {
    health: ['GET', '/v2/health/ready'],
    metadata: ['GET', '/v2/models/simple'],
    inference: ['POST', '/v2/models/simple/infer', INFER],
    'shared-memory': ['GET', '/v2/systemsharedmemory/status'],
    'model-config': ['GET', '/v2/models/simple/config'],
    'model-repository': ['POST', '/v2/repository/index', {}],
    statistics: ['GET', '/v2/models/simple/stats'],
    trace: ['GET', '/v2/trace/setting'],
    logging: ['GET', '/v2/logging'],
  };
  const GRPC: Record<Group, [rpc: string, request: unknown]> = {
    health: ['ServerReady', {}],
    metadata: ['ModelMetadata', { name: 'simple' }],
    inference: [
      'ModelInfer',
      {
        model_name: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
        ],
        raw_input_contents: [Buffer.alloc(64), Buffer.alloc(64)],
      },
    ],
    'shared-memory': ['SystemSharedMemoryStatus', {}],
    'model-config': ['ModelConfig', { name: 'simple' }],
    'model-repository': ['RepositoryIndex', {}],
    statistics: ['ModelStatistics', { name: 'simple' }],
    trace: ['TraceSetting', {}],
    logging: ['LogSettings', {}],
  };
  const keys = (group: Group): [string, Record<string, string>, boolean][] => [
    ['right key', { [header(group)]: secret(group) }, true],
    ['wrong key', { [header(group)]: `${secret(group)}x` }, false],
    [
      "another group's key",
      { [header(group === 'health' ? 'metadata' : 'health')]: secret(group === 'health' ? 'metadata' : 'health') },
      false,
    ],
    ['no key', {}, false],
  ];

  for (const group of GROUPS) {
    for (const [label, headers, allowed] of keys(group)) {
      it(`HTTP ${group}, ${label}: ${allowed ? 'served' : `403 naming '${header(group)}'`}`, async () => {
        const [method, path, body] = HTTP[group];
        const r = await fetch(`${server.url}${path}`, {
          method,
          headers: { 'content-type': 'application/json', ...headers },
          ...(body !== undefined && { body: JSON.stringify(body) }),
        });
        const text = await r.text();
        if (allowed) {
          expect(r.status, text).toBe(200);
        } else {
          expect(r.status).toBe(403);
          expect(JSON.parse(text).error).toBe(`This API is restricted, expecting header '${header(group)}'`);
        }
      });

      it(`gRPC ${group}, ${label}: ${allowed ? 'served' : 'UNAVAILABLE naming the prefixed header'}`, async () => {
        const [rpc, request] = GRPC[group];
        const metadata = new Metadata();
        for (const [k, v] of Object.entries(headers)) metadata.set(`triton-grpc-protocol-${k}`, v);
        const error = await new Promise<any>((resolve) => grpc[rpc](request, metadata, (e: unknown) => resolve(e)));
        if (allowed) {
          expect(error?.details ?? null).toBeNull();
        } else {
          expect(error.code).toBe(GrpcStatus.UNAVAILABLE);
          expect(error.details).toBe(`This protocol is restricted, expecting header 'triton-grpc-protocol-${header(group)}'`);
        }
      });
    }
  }
});

describe('the model-repository key injected from the environment (BATCHWISE_MODEL_REPOSITORY_KEY)', () => {
  it('restricts the model-repository group with header batchwise-key, and nothing else', async () => {
    const server = await startChildServer(['--model-repository', EXAMPLES], { BATCHWISE_MODEL_REPOSITORY_KEY: 'from-secrets-manager' });
    try {
      const index = (headers: Record<string, string>) =>
        fetch(`${server.url}/v2/repository/index`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: '{}',
        });
      expect((await index({ 'batchwise-key': 'from-secrets-manager' })).status).toBe(200);
      expect((await index({ 'batchwise-key': 'wrong' })).status).toBe(403);
      const refused = await index({});
      expect(refused.status).toBe(403);
      expect(((await refused.json()) as { error: string }).error).toBe("This API is restricted, expecting header 'batchwise-key'");
      expect((await fetch(`${server.url}/v2/models/simple`)).status).toBe(200);
      expect(JSON.stringify(server.logs)).not.toContain('from-secrets-manager');
    } finally {
      server.process.kill('SIGTERM');
      await server.exited;
    }
  });
});
