import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BatchwiseClientError,
  GrpcClient,
  GrpcStatus as status,
  HttpClient,
  type InferResult,
  type StreamResponse,
} from '@batchwise/client';
import { parseRestrictions } from '../packages/server/src/access/restricted-api.ts';
import { createGrpcFrontend } from '../packages/server/src/grpc/server.ts';
import { resolveServerOptions } from '../packages/server/src/options/index.ts';
import { EXAMPLE_MODELS, slowModel } from '@batchwise/modelgen';
import { EXAMPLES, makeRepository } from './support/repository.ts';
import { startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const INPUT0 = Int32Array.from({ length: 16 }, (_, i) => i);
const INPUT1 = Int32Array.from({ length: 16 }, () => 1);
const simpleRequest = (id?: string) => ({
  model: 'simple',
  ...(id !== undefined && { id }),
  inputs: [
    { name: 'INPUT0', datatype: 'INT32' as const, shape: [1, 16], data: INPUT0 },
    { name: 'INPUT1', datatype: 'INT32' as const, shape: [1, 16], data: INPUT1 },
  ],
});

async function rejection(promise: Promise<unknown>): Promise<BatchwiseClientError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(BatchwiseClientError);
  return error as BatchwiseClientError;
}

describe('gRPC frontend through @batchwise/client on the example repository', () => {
  let server: Server;
  let grpc: GrpcClient;
  let http: HttpClient;
  beforeAll(async () => {
    server = await startTestServer([EXAMPLES]);
    grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
    http = new HttpClient({ url: server.url });
  });
  afterAll(async () => {
    await grpc?.close();
    await http?.close();
    await server?.close();
  });

  it('health, metadata, readiness', async () => {
    expect(await grpc.isServerLive()).toBe(true);
    expect(await grpc.isServerReady()).toBe(true);
    expect(await grpc.isModelReady('simple')).toBe(true);
    expect(await grpc.isModelReady('simple', '1')).toBe(true);
    expect(await grpc.isModelReady('simple', '7')).toBe(false);
    expect(await grpc.isModelReady('nope')).toBe(false);
    expect(await grpc.serverMetadata()).toEqual(await http.serverMetadata());
    const meta = await grpc.modelMetadata('simple');
    expect(meta).toMatchObject({
      name: 'simple',
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] },
        { name: 'INPUT1', datatype: 'INT32', shape: [-1, 16] },
      ],
    });
    const { parameters: _p, ...httpMeta } = (await http.modelMetadata('simple')) as typeof meta & { parameters?: unknown };
    expect(meta).toEqual(httpMeta);
  });

  it('grpc.health.v1: server, ready model, unknown model', async () => {
    expect(await grpc.healthCheck()).toBe('SERVING');
    expect(await grpc.healthCheck('inference.GRPCInferenceService')).toBe('SERVING');
    expect(await grpc.healthCheck('simple')).toBe('SERVING');
    const e = await rejection(grpc.healthCheck('nope'));
    expect(e.grpcCode).toBe(status.NOT_FOUND);
  });

  it('model config travels as model_config.proto', async () => {
    const config = await grpc.modelConfig('simple');
    expect(config).toMatchObject({ name: 'simple', platform: 'onnxruntime_onnx', max_batch_size: 8 });
    expect(config['input']).toMatchObject([
      { name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] },
      { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [16] },
    ]);
    const e = await rejection(grpc.modelConfig('nope'));
    expect(e.grpcCode).toBe(status.INVALID_ARGUMENT);
    expect(e.message).toBe("Request for unknown model: 'nope' is not found");
  });

  it('infers, and gives exactly what HTTP (binary and JSON) gives', async () => {
    const viaGrpc = await grpc.infer({ ...simpleRequest('r1'), parameters: { priority: 0 } });
    expect(viaGrpc).toMatchObject({ modelName: 'simple', modelVersion: '1', id: 'r1' });
    expect(viaGrpc.outputs.map((o) => [o.name, o.datatype, o.shape])).toEqual([
      ['OUTPUT0', 'INT32', [1, 16]],
      ['OUTPUT1', 'INT32', [1, 16]],
    ]);
    expect(viaGrpc.outputs[0]!.data).toEqual(INPUT0.map((v) => v + 1));
    expect(viaGrpc.outputs[1]!.data).toEqual(INPUT0.map((v) => v - 1));
    expect(await http.infer(simpleRequest('r1'))).toEqual(viaGrpc);
    expect(await http.infer({ ...simpleRequest('r1'), binary: false })).toEqual(viaGrpc);
  });

  it('returns only the outputs asked for', async () => {
    const r = await grpc.infer({ ...simpleRequest(), outputs: ['OUTPUT1'] });
    expect(r.outputs.map((o) => o.name)).toEqual(['OUTPUT1']);
  });

  it('BYTES round-trip', async () => {
    const r = await grpc.infer({
      model: 'identity_bytes',
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [3, 1], data: ['a', '', 'héllo'] }],
    });
    expect((r.outputs[0]!.data as Uint8Array[]).map((b) => Buffer.from(b).toString())).toEqual(['a', '', 'héllo']);
  });

  it('maps errors to gRPC status codes with the server message, and stays ready', async () => {
    const unknown = await rejection(grpc.infer({ ...simpleRequest(), model: 'nope' }));
    expect(unknown.grpcCode).toBe(status.INVALID_ARGUMENT);
    const badShape = await rejection(
      grpc.infer({
        model: 'simple',
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 3], data: [1, 2, 3] }, simpleRequest().inputs[1]!],
      }),
    );
    expect(badShape.grpcCode).toBe(status.INVALID_ARGUMENT);
    expect(badShape.message).toContain("unexpected shape for input 'INPUT0'");
    const badType = await rejection(
      grpc.infer({
        model: 'simple',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: new Float32Array(16) }, simpleRequest().inputs[1]!],
      }),
    );
    expect(badType.message).toContain("data-type is 'FP32'");
    const badVersion = await rejection(grpc.infer({ ...simpleRequest(), version: '9' }));
    expect(badVersion.grpcCode).toBe(status.NOT_FOUND);
    const batch = await rejection(
      grpc.infer({
        model: 'simple',
        inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32' as const, shape: [9, 16], data: new Int32Array(144) })),
      }),
    );
    expect(batch.message).toContain('batch-size must be <= 8');
    const param = await rejection(grpc.infer({ ...simpleRequest(), parameters: { priority: 'high' } }));
    expect(param.message).toContain("request parameter 'priority'");
    expect(await grpc.isServerReady()).toBe(true);
  });

  it('statistics in Triton shape, as HTTP reports them', async () => {
    await grpc.infer(simpleRequest());
    const [stats] = await grpc.modelStatistics('simple');
    expect(stats).toMatchObject({ name: 'simple', version: '1' });
    expect(stats!.inference_count).toBeGreaterThan(0);
    expect(stats!.inference_stats.success.count).toBeGreaterThan(0);
    expect(stats!.inference_stats.fail.count).toBeGreaterThan(0);
    const [viaHttp] = await http.modelStatistics('simple');
    expect(viaHttp!.inference_stats.success.count).toBe(stats!.inference_stats.success.count);
    const all = await grpc.modelStatistics();
    expect([...new Set(all.map((s) => s.name))].sort()).toEqual(EXAMPLE_MODELS.map((m) => m.name).sort());
    expect((await rejection(grpc.modelStatistics('nope'))).grpcCode).toBe(status.INVALID_ARGUMENT);
  });

  it('repository index; load/unload refused in model control mode NONE', async () => {
    const index = await grpc.repositoryIndex();
    expect([...new Set(index.map((m) => m.name))].sort()).toEqual(EXAMPLE_MODELS.map((m) => m.name).sort());
    expect(index.find((m) => m.name === 'simple')).toMatchObject({ version: '1', state: 'READY' });
    expect(await grpc.repositoryIndex({ ready: true })).toEqual(
      await http.repositoryIndex({ ready: true }).then((r) => r.map((m) => ({ version: '', state: '', reason: '', ...m }))),
    );
    const load = await rejection(grpc.loadModel('simple'));
    expect(load.grpcCode).toBe(status.UNAVAILABLE);
    // Triton gives the same words in NONE as in POLL mode (model_repository_manager.cc).
    expect(load.message).toBe('explicit model load / unload is not allowed if polling is enabled');
    expect((await rejection(grpc.unloadModel('simple'))).grpcCode).toBe(status.UNAVAILABLE);
    expect((await rejection(http.loadModel('simple'))).httpStatus).toBe(503);
  });

  it('streams: answers each request with its id, errors inside the stream, stream survives', async () => {
    const stream = grpc.streamInfer();
    stream.write(simpleRequest('a'));
    stream.write({ ...simpleRequest('bad'), model: 'nope' });
    stream.write({ model: 'simple', id: 'bad-shape', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 2], data: [1, 2] }] });
    stream.write(simpleRequest('b'));
    stream.end();
    const answers: StreamResponse[] = [];
    for await (const answer of stream) answers.push(answer);
    expect(answers).toHaveLength(4);
    const byId = new Map(answers.map((a) => [a.ok ? a.result.id : a.id, a]));
    for (const id of ['a', 'b']) {
      const a = byId.get(id)!;
      expect(a.ok).toBe(true);
      expect((a as { result: InferResult }).result.outputs[0]!.data).toEqual(INPUT0.map((v) => v + 1));
    }
    expect(byId.get('bad')).toMatchObject({ ok: false, error: { message: "Request for unknown model: 'nope' is not found" } });
    expect(byId.get('bad-shape')).toMatchObject({ ok: false });
  });

  it('HTTP has no stream', () => {
    expect(() => http.streamInfer()).toThrow(BatchwiseClientError);
  });

  it('LogSettings reads and sets the log level; TraceSetting answers; CUDA shared memory lists no region', async () => {
    // The client does not wrap these rare RPCs; call them on its channel.
    const raw = (grpc as unknown as { client: Record<string, Function> }).client;
    const call = (method: string, request: unknown) =>
      new Promise<any>((resolve, reject) => raw[method]!.call(raw, request, (e: unknown, r: unknown) => (e ? reject(e) : resolve(r))));
    const level = server.logger.level;
    const current = await call('LogSettings', { settings: {} });
    expect(current.settings.log_info).toMatchObject({ bool_param: server.logger.isLevelEnabled('info') });
    const updated = await call('LogSettings', { settings: { log_verbose_level: { uint32_param: 1 } } });
    expect(updated.settings).toMatchObject({ log_verbose_level: { uint32_param: 1 }, log_info: { bool_param: true } });
    expect(server.logger.level).toBe('debug');
    await call('LogSettings', {
      settings: {
        log_verbose_level: { uint32_param: 0 },
        log_info: { bool_param: false },
        log_warning: { bool_param: false },
        log_error: { bool_param: false },
      },
    });
    expect(server.logger.level).toBe('silent');
    server.logger.level = level;
    await expect(call('LogSettings', { settings: { log_bogus: { bool_param: true } } })).rejects.toMatchObject({
      code: status.INVALID_ARGUMENT,
    });
    expect((await call('TraceSetting', { settings: {} })).settings.trace_mode).toEqual({ value: ['triton'] });
    // CUDA shared memory lists no region and unregisters nothing; the whole of it is checked with Triton's protos (grpc-upstream-compat).
    expect([await call('CudaSharedMemoryStatus', {}), await call('CudaSharedMemoryUnregister', {})]).toEqual([{ regions: {} }, {}]);
  });
});

describe('gRPC repository control in explicit mode', () => {
  it('loads with a config override, unloads, and reports unknown models', async () => {
    const server = await startTestServer([EXAMPLES], { modelControlMode: 'explicit', loadModels: ['simple'] });
    const client = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
    try {
      expect(await client.isModelReady('identity_fp32')).toBe(false);
      await client.loadModel('identity_fp32');
      expect(await client.isModelReady('identity_fp32')).toBe(true);
      const r = await client.infer({
        model: 'identity_fp32',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], data: [1, 2, 3] }],
      });
      expect(r.outputs[0]!.data).toEqual(Float32Array.of(1, 2, 3));
      await client.unloadModel('identity_fp32', { unloadDependents: true });
      expect(await client.isModelReady('identity_fp32')).toBe(false);
      expect(await client.healthCheck('identity_fp32')).toBe('NOT_SERVING');
      const config = JSON.stringify({
        name: 'identity_fp32',
        max_batch_size: 4,
        input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
        output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
      });
      await client.loadModel('identity_fp32', { config });
      expect(await client.modelConfig('identity_fp32')).toMatchObject({ max_batch_size: 4 });
      const missing = await rejection(client.loadModel('nope'));
      expect(missing.grpcCode).toBe(status.INVALID_ARGUMENT);
      expect(missing.message).toContain("model 'nope' was not found");
    } finally {
      await client.close();
      await server.close();
    }
  });
});

describe('gRPC restricted protocol', () => {
  it('refuses restricted groups without the metadata key, as Triton does; health stays open', async () => {
    const server = await startTestServer([EXAMPLES], { allowGrpc: false, allowHttp: false, allowMetrics: false });
    const { grpcMaxMessageBytes, grpcKeepaliveTimeMs, grpcKeepaliveTimeoutMs } = resolveServerOptions({ modelRepositories: [] });
    const frontend = createGrpcFrontend(server.service, {
      maxMessageBytes: grpcMaxMessageBytes,
      keepaliveTimeMs: grpcKeepaliveTimeMs,
      keepaliveTimeoutMs: grpcKeepaliveTimeoutMs,
      restrictions: parseRestrictions(['model-repository,inference:admin-key=s3cret'], 'triton-grpc-protocol-'),
    });
    const port = await frontend.listen('127.0.0.1', 0);
    const open = new GrpcClient({ url: `127.0.0.1:${port}` });
    const wrong = new GrpcClient({ url: `127.0.0.1:${port}`, metadata: { 'triton-grpc-protocol-admin-key': 'guess' } });
    const admin = new GrpcClient({ url: `127.0.0.1:${port}`, metadata: { 'triton-grpc-protocol-admin-key': 's3cret' } });
    try {
      expect(await open.isServerReady()).toBe(true);
      expect(await open.healthCheck()).toBe('SERVING');
      for (const client of [open, wrong]) {
        const e = await rejection(client.infer(simpleRequest()));
        expect(e.grpcCode).toBe(status.UNAVAILABLE);
        expect(e.message).toBe("This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'");
        expect((await rejection(client.repositoryIndex())).grpcCode).toBe(status.UNAVAILABLE);
        const stream = client.streamInfer();
        stream.write(simpleRequest('s'));
        stream.end();
        await expect(
          (async () => {
            for await (const _ of stream);
          })(),
        ).rejects.toMatchObject({ grpcCode: status.UNAVAILABLE });
      }
      expect((await admin.infer(simpleRequest())).outputs).toHaveLength(2);
      expect((await admin.repositoryIndex()).length).toBeGreaterThan(0);
      const stream = admin.streamInfer();
      stream.write(simpleRequest('s'));
      stream.end();
      const answers: StreamResponse[] = [];
      for await (const answer of stream) answers.push(answer);
      expect(answers).toMatchObject([{ ok: true }]);
    } finally {
      await Promise.all([open.close(), wrong.close(), admin.close()]);
      await frontend.close(1000);
      await server.close();
    }
  });
});

describe('gRPC frontend limits and shutdown', () => {
  it('refuses messages over the configured size with RESOURCE_EXHAUSTED', async () => {
    const server = await startTestServer([EXAMPLES], { grpcMaxMessageBytes: 4096 });
    const client = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
    try {
      const e = await rejection(
        client.infer({
          model: 'identity_fp32',
          inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2048], data: new Float32Array(2048) }],
        }),
      );
      expect(e.grpcCode).toBe(status.RESOURCE_EXHAUSTED);
      expect(await client.isServerReady()).toBe(true);
    } finally {
      await client.close();
      await server.close();
    }
  });

  describe('on close, with a stream that has a request running and one queued behind it', () => {
    const WIDTH = 256;
    // max_batch_size 1: each request runs alone, so the second one waits in the queue (and
    // shows in nv_inference_pending_request_count) for the whole of the first run.
    const CONFIG = `name: "slow"
max_batch_size: 1
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
dynamic_batching { }`;
    let repo: Awaited<ReturnType<typeof makeRepository>>;
    beforeAll(async () => {
      repo = await makeRepository([{ name: 'slow', model: slowModel({ repeats: 60000, width: WIDTH }), config: CONFIG }]);
    });
    afterAll(() => repo?.remove());

    async function streamWithQueuedRequest(server: Server, client: GrpcClient) {
      const stream = client.streamInfer();
      const answers: StreamResponse[] = [];
      const done = (async () => {
        for await (const answer of stream) answers.push(answer);
      })();
      const request = (id: string) => ({
        model: 'slow',
        id,
        inputs: [{ name: 'INPUT0', datatype: 'FP32' as const, shape: [1, WIDTH], data: new Float32Array(WIDTH).fill(0.5) }],
      });
      stream.write(request('running'));
      stream.write(request('queued'));
      const metrics = `http://127.0.0.1:${server.metricsPort}/metrics`;
      const pending = async () =>
        Number(/^nv_inference_pending_request_count\{model="slow",version="1"\} (\S+)$/m.exec(await (await fetch(metrics)).text())?.[1]);
      await expect.poll(pending, { timeout: 30_000, interval: 5 }).toBe(1);
      return { answers, done };
    }

    it('the stream gets both in-flight answers, then ends with status OK', async () => {
      const server = await startTestServer([repo.dir]);
      const client = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
      try {
        const { answers, done } = await streamWithQueuedRequest(server, client);
        await server.close();
        // The client's stream throws on any status but OK.
        await done;
        expect(answers.map((a) => (a.ok ? a.result.id : a.error.message))).toEqual(['running', 'queued']);
      } finally {
        await client.close();
      }
    });

    it('calls still open when the exit timeout runs out are cancelled', async () => {
      const server = await startTestServer([repo.dir]);
      const client = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
      try {
        const { answers, done } = await streamWithQueuedRequest(server, client);
        const outcome = done.then(
          () => undefined,
          (e: unknown) => e,
        );
        await server.close({ exitTimeoutMs: 1 });
        const error = await outcome;
        expect(error).toBeInstanceOf(BatchwiseClientError);
        expect(error).toMatchObject({
          grpcCode: status.UNAVAILABLE,
          message: 'Server is shutting down: the exit timeout ran out before this stream was answered',
        });
        expect(answers.filter((a) => a.ok && a.result.id === 'queued')).toEqual([]);
      } finally {
        await client.close();
      }
    });
  });
});
