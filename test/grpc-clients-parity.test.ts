/**
 * @batchwise/client over gRPC, HTTP binary and HTTP JSON gives identical results for every
 * datatype (identity models generated per datatype).
 */
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, HttpClient, type InputData, type InferResult } from '@batchwise/client';
import { configPbtxt, identity, type TensorDatatype } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { startTestServer } from './support/server.ts';

const INPUTS: Record<TensorDatatype, InputData> = {
  BOOL: [true, false, false, true],
  UINT8: Uint8Array.of(0, 1, 128, 255),
  UINT16: [0, 1, 40000, 65535],
  UINT32: Uint32Array.of(0, 1, 3e9, 2 ** 32 - 1),
  UINT64: [0n, 1n, 2n ** 53n + 1n, 2n ** 64n - 1n],
  INT8: Int8Array.of(-128, -1, 0, 127),
  INT16: [-32768, -1, 0, 32767],
  INT32: Int32Array.of(-(2 ** 31), -1, 0, 2 ** 31 - 1),
  INT64: BigInt64Array.of(-(2n ** 63n), -1n, 2n ** 53n + 1n, 2n ** 63n - 1n),
  FP16: Uint16Array.of(0x3c00, 0xc000, 0x0000, 0x7bff),
  FP32: Float32Array.of(1.5, -0.1, 0, 3.4e38),
  FP64: [Math.PI, -1e300, 0, 5e-324],
  BYTES: ['a', '', 'héllo', '\u{1F600}'],
};
const JSON_SAFE: Partial<Record<TensorDatatype, InputData>> = {
  UINT64: [0n, 1n, 2n ** 53n - 1n, 42n],
  INT64: [-(2n ** 53n) + 1n, -1n, 0n, 2n ** 53n - 1n],
};
const DATATYPES = Object.keys(INPUTS) as TensorDatatype[];
const modelOf = (dt: TensorDatatype) => `id_${dt.toLowerCase()}`;

describe('gRPC and HTTP clients agree on every datatype', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let grpc: GrpcClient;
  let http: HttpClient;

  beforeAll(async () => {
    repo = await makeRepository(
      DATATYPES.map((dt) => ({
        name: modelOf(dt),
        model: identity(dt, [-1]),
        config: configPbtxt({
          name: modelOf(dt),
          maxBatchSize: 8,
          inputs: [{ name: 'INPUT0', datatype: dt, dims: [-1] }],
          outputs: [{ name: 'OUTPUT0', datatype: dt, dims: [-1] }],
        }),
      })),
    );
    server = await startTestServer([repo.dir]);
    grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
    http = new HttpClient({ url: server.url });
  });
  afterAll(async () => {
    await grpc?.close();
    await http?.close();
    await server?.close();
    await repo?.remove();
  });

  it.each(DATATYPES)('%s', async (dt) => {
    const request = { model: modelOf(dt), id: dt, inputs: [{ name: 'INPUT0', datatype: dt, shape: [2, 2], data: INPUTS[dt] }] };
    const viaGrpc = await grpc.infer(request);
    expect(viaGrpc).toMatchObject({ modelName: modelOf(dt), modelVersion: '1', id: dt });
    const out = viaGrpc.outputs[0]!;
    expect([out.name, out.datatype, out.shape]).toEqual(['OUTPUT0', dt, [2, 2]]);
    expect(normalize(out.data)).toEqual(expected(dt));
    expect(await http.infer(request)).toEqual(viaGrpc);
    if (dt === 'FP16') return; // binary only
    // The server's JSON reader holds numbers as doubles: 64-bit extremes go binary only.
    const json = JSON_SAFE[dt] ?? INPUTS[dt];
    const viaJson = await http.infer({ ...request, binary: false, inputs: [{ ...request.inputs[0]!, data: json }] });
    const viaGrpcSame = await grpc.infer({ ...request, inputs: [{ ...request.inputs[0]!, data: json }] });
    expect(viaJson).toEqual(viaGrpcSame);
  });

  it('a stream answers many concurrent requests', async () => {
    const stream = grpc.streamInfer();
    const ids = Array.from({ length: 50 }, (_, i) => `r${i}`);
    for (const id of ids)
      stream.write({ model: 'id_fp32', id, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], data: [Number(id.slice(1))] }] });
    stream.end();
    const results: InferResult[] = [];
    for await (const answer of stream) if (answer.ok) results.push(answer.result);
    expect(results.map((r) => r.id).sort()).toEqual([...ids].sort());
    for (const r of results) expect(r.outputs[0]!.data).toEqual(Float32Array.of(Number(r.id!.slice(1))));
  });
});

describe('GrpcClient channels', () => {
  it('spreads concurrent infer calls over that many connections', async () => {
    const repo = await makeRepository([{ name: 'id_fp32', model: identity('FP32', [-1]) }]);
    const server = await startTestServer([repo.dir]);
    // A TCP relay in front of the server counts the connections the client opens.
    let connections = 0;
    const relay = createServer((socket) => {
      connections++;
      const upstream = createConnection(server.grpcPort, '127.0.0.1');
      socket.pipe(upstream).pipe(socket);
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const client = new GrpcClient({ url: `127.0.0.1:${(relay.address() as AddressInfo).port}`, channels: 3 });
    try {
      const results = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          client.infer({ model: 'id_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], data: [i] }] }),
        ),
      );
      expect(results.map((r) => r.outputs[0]!.data[0])).toEqual(Array.from({ length: 30 }, (_, i) => i));
      expect(connections).toBe(3);
      expect(() => new GrpcClient({ url: 'localhost:1', channels: 0 })).toThrow(/channels must be a positive integer/);
    } finally {
      await client.close();
      relay.close();
      await server.close();
      await repo.remove();
    }
  });
});

function expected(dt: TensorDatatype): unknown[] {
  const data = INPUTS[dt] as ArrayLike<unknown>;
  if (dt === 'BYTES') return Array.from(data as string[]);
  if (dt === 'BOOL') return Array.from(data, (v) => (v ? 1 : 0));
  if (dt === 'INT64' || dt === 'UINT64') return Array.from(data, (v) => BigInt(v as bigint));
  if (dt === 'FP32') return Array.from(Float32Array.from(data as number[]));
  return Array.from(data);
}

function normalize(data: unknown): unknown[] {
  if (Array.isArray(data)) return data.map((e: Uint8Array) => Buffer.from(e).toString('utf8'));
  return Array.from(data as ArrayLike<unknown>);
}
