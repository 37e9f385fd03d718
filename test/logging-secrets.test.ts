import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startChildServer, type ChildServer } from './support/child-server.ts';
import { credentials, loadPackageDefinition, Metadata } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { DEFAULT_PROTO_DIR } from '@batchwise/client';
import { identity } from '@batchwise/modelgen';
import { EXAMPLES, makeRepository } from './support/repository.ts';

const SECRET = 'SUPERSECRET123';
const FLOAT_MARKER = 12345.678;
const BYTES_MARKER = 'TENSORDATA_MARKER';
/** An INT8 element out of range: error messages once quoted such values, and gRPC failures are logged. */
const INT_MARKER = 98765;

describe('logs carry neither secrets nor tensor data', () => {
  let server: ChildServer;
  let output = '';
  let int8: Awaited<ReturnType<typeof makeRepository>>;
  beforeAll(async () => {
    int8 = await makeRepository([{ name: 'int8', model: identity('INT8', [-1]) }]);
    server = await startChildServer([
      '--model-repository',
      EXAMPLES,
      '--model-repository',
      int8.dir,
      '--http-restricted-api',
      `model-repository:admin-key=${SECRET}`,
      '--log-verbose',
      '1',
    ]);
    server.process.stdout!.on('data', (d) => (output += d));
    server.process.stderr!.on('data', (d) => (output += d));
  });
  afterAll(async () => {
    server.process.kill('SIGTERM');
    await server.exited;
    await int8.remove();
  });

  it('after good, failing and refused requests', async () => {
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    await post('/v2/models/identity_bytes/infer', { inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1], data: [BYTES_MARKER] }] });
    await post('/v2/models/identity_fp32/infer', {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], data: [FLOAT_MARKER, FLOAT_MARKER, 1] }],
    });
    await post('/v2/models/identity_bytes/infer', { inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 2], data: [BYTES_MARKER] }] });
    await post('/v2/models/int8/infer', { inputs: [{ name: 'INPUT0', datatype: 'INT8', shape: [1, 2], data: [1, INT_MARKER] }] });
    // The same over gRPC, unary and streaming (stream failures are logged at --log-verbose 1).
    const grpcPort = (server.logs as { grpcPort?: number }[]).find((l) => typeof l.grpcPort === 'number')!.grpcPort!;
    const root = loadPackageDefinition(
      loadSync('grpc_service.proto', {
        keepCase: true,
        longs: Number,
        enums: String,
        defaults: true,
        oneofs: true,
        includeDirs: [DEFAULT_PROTO_DIR],
      }),
    ) as any;
    const client = new root.inference.GRPCInferenceService(`127.0.0.1:${grpcPort}`, credentials.createInsecure());
    const request = {
      model_name: 'int8',
      inputs: [{ name: 'INPUT0', datatype: 'INT8', shape: [1, 2], contents: { int_contents: [1, INT_MARKER] } }],
    };
    const unaryError = await new Promise<any>((resolve) => client.ModelInfer(request, new Metadata(), (e: unknown) => resolve(e)));
    expect(unaryError.details).toMatch(/element 1 of input 'INPUT0' is outside the range of INT8/);
    const stream = client.ModelStreamInfer();
    const answer = await new Promise<any>((resolve) => {
      stream.on('data', resolve);
      stream.write(request);
    });
    stream.end();
    expect(answer.error_message).toMatch(/outside the range of INT8/);
    client.close();
    await post('/v2/repository/index', {}, { 'admin-key': 'wrong-key' });
    await post('/v2/repository/index', {}, { 'admin-key': SECRET });
    // The server's logs in this run; give the pipes a moment.
    await new Promise((r) => setTimeout(r, 300));
    const logged = `${output}\n${JSON.stringify(server.logs)}`;
    expect(logged.length).toBeGreaterThan(100);
    expect(logged).not.toContain(SECRET);
    expect(logged).not.toContain(BYTES_MARKER);
    expect(logged).not.toContain(String(FLOAT_MARKER));
    expect(logged).not.toContain(String(INT_MARKER));
    expect(logged).toMatch(/outside the range of INT8/);
  });
});
