/**
 * Triton's system shared memory extension, end to end, as Triton's simple_http_shm_client and
 * simple_grpc_shm_client use it: the client creates POSIX shared memory objects (a file in
 * /dev/shm is exactly what shm_open creates), registers regions of them, sends requests that
 * name the regions, and reads the outputs from its own mapping.
 */
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, HttpClient, type InferenceClient } from '@batchwise/client';
import { EXAMPLES } from './support/repository.ts';
import { postJson, postBinary, startTestServer } from './support/server.ts';
import { describeWithTritonProtocol, status, unaryCall, upstreamClients, type AnyClient } from './support/upstream-grpc.ts';

const SHM_DIR = '/dev/shm';
async function getJson(url: string): Promise<{ status: number; json: any }> {
  const response = await fetch(url);
  const text = await response.text();
  return { status: response.status, json: text === '' ? undefined : JSON.parse(text) };
}
const bytesOf = (view: ArrayBufferView) => Buffer.from(view.buffer, view.byteOffset, view.byteLength);
const INPUT0 = Int32Array.from({ length: 16 }, (_, i) => i);
const INPUT1 = Int32Array.from({ length: 16 }, () => 1);
const SUM = INPUT0.map((v, i) => v + INPUT1[i]!);
const DIFFERENCE = INPUT0.map((v, i) => v - INPUT1[i]!);

describe.skipIf(!existsSync(SHM_DIR))('system shared memory', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  const suffix = `${process.pid}_${Date.now()}`;
  const inputKey = `/batchwise_test_input_${suffix}`;
  const outputKey = `/batchwise_test_output_${suffix}`;
  const objectPath = (key: string) => join(SHM_DIR, key.slice(1));

  /** The client side of Triton's simple shm example: 128-byte input and output objects. */
  async function createObjects(): Promise<void> {
    await writeFile(objectPath(inputKey), Buffer.concat([bytesOf(INPUT0), bytesOf(INPUT1)]));
    await writeFile(objectPath(outputKey), Buffer.alloc(128));
  }
  async function outputs(): Promise<{ output0: Int32Array; output1: Int32Array }> {
    const bytes = await readFile(objectPath(outputKey));
    return {
      output0: new Int32Array(bytes.buffer, bytes.byteOffset, 16),
      output1: new Int32Array(bytes.buffer, bytes.byteOffset + 64, 16),
    };
  }

  beforeAll(async () => {
    server = await startTestServer([EXAMPLES]);
  });
  afterEach(async () => {
    await fetch(`${server.url}/v2/systemsharedmemory/unregister`, { method: 'POST' });
    await rm(objectPath(inputKey), { force: true });
    await rm(objectPath(outputKey), { force: true });
  });
  afterAll(async () => {
    await server?.close();
  });

  const register = (name: string, body: unknown) => postJson(`${server.url}/v2/systemsharedmemory/region/${name}/register`, body);
  const shmInput = (name: string, offset: number) => ({
    name,
    datatype: 'INT32',
    shape: [1, 16],
    parameters: { shared_memory_region: 'input_data', shared_memory_byte_size: 64, ...(offset > 0 && { shared_memory_offset: offset }) },
  });
  const shmOutput = (name: string, offset: number) => ({
    name,
    parameters: { binary_data: false, shared_memory_region: 'output_data', shared_memory_byte_size: 64, shared_memory_offset: offset },
  });

  it('HTTP: register, status, infer with inputs and outputs in shared memory, unregister', async () => {
    await createObjects();
    expect((await register('input_data', { key: inputKey, offset: 0, byte_size: 128 })).status).toBe(200);
    expect((await register('output_data', { key: outputKey, byte_size: 128 })).status).toBe(200);
    expect(await getJson(`${server.url}/v2/systemsharedmemory/status`)).toEqual({
      status: 200,
      json: [
        { name: 'input_data', key: inputKey, offset: 0, byte_size: 128 },
        { name: 'output_data', key: outputKey, offset: 0, byte_size: 128 },
      ],
    });
    expect(await getJson(`${server.url}/v2/systemsharedmemory/region/output_data/status`)).toEqual({
      status: 200,
      json: [{ name: 'output_data', key: outputKey, offset: 0, byte_size: 128 }],
    });

    const response = await postJson(`${server.url}/v2/models/simple/infer`, {
      inputs: [shmInput('INPUT0', 0), shmInput('INPUT1', 64)],
      outputs: [shmOutput('OUTPUT0', 0), shmOutput('OUTPUT1', 64)],
    });
    expect(response.status).toBe(200);
    // As Triton: outputs written to shared memory are described, not sent.
    expect(response.json.outputs).toEqual([
      { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] },
      { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16] },
    ]);
    const { output0, output1 } = await outputs();
    expect([...output0]).toEqual([...SUM]);
    expect([...output1]).toEqual([...DIFFERENCE]);

    // A client that writes new inputs into its mapping gets new outputs: nothing is cached.
    await writeFile(objectPath(inputKey), Buffer.concat([bytesOf(INPUT1), bytesOf(INPUT1)]));
    expect(
      (
        await postJson(`${server.url}/v2/models/simple/infer`, {
          inputs: [shmInput('INPUT0', 0), shmInput('INPUT1', 64)],
          outputs: [shmOutput('OUTPUT0', 0)],
        })
      ).status,
    ).toBe(200);
    expect([...(await outputs()).output0]).toEqual(new Array(16).fill(2));

    expect((await postJson(`${server.url}/v2/systemsharedmemory/region/input_data/unregister`, '')).status).toBe(200);
    expect((await getJson(`${server.url}/v2/systemsharedmemory/status`)).json).toEqual([
      { name: 'output_data', key: outputKey, offset: 0, byte_size: 128 },
    ]);
    expect((await postJson(`${server.url}/v2/systemsharedmemory/unregister`, '')).status).toBe(200);
    expect((await getJson(`${server.url}/v2/systemsharedmemory/status`)).json).toEqual([]);
  });

  it('HTTP: shared memory inputs mix with JSON and binary inputs, and shared memory outputs with binary ones', async () => {
    await createObjects();
    await register('input_data', { key: inputKey, offset: 0, byte_size: 128 });
    await register('output_data', { key: outputKey, offset: 0, byte_size: 128 });
    const header = {
      inputs: [shmInput('INPUT0', 0), { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } }],
      outputs: [shmOutput('OUTPUT0', 0), { name: 'OUTPUT1', parameters: { binary_data: true } }],
    };
    const response = await postBinary(`${server.url}/v2/models/simple/infer`, header, [bytesOf(INPUT1)]);
    expect(response.status).toBe(200);
    const headerLength = Number(response.headers.get('inference-header-content-length'));
    const json = JSON.parse(response.body.subarray(0, headerLength).toString());
    expect(json.outputs).toEqual([
      { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] },
      { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
    ]);
    expect(response.body.subarray(headerLength)).toEqual(bytesOf(DIFFERENCE));
    expect([...(await outputs()).output0]).toEqual([...SUM]);
  });

  it('HTTP: bad registrations and bad references get a clear 4xx, and the server keeps serving', async () => {
    await createObjects();
    expect(await register('r', { key: '/batchwise_no_such_object', byte_size: 4 })).toMatchObject({
      status: 400,
      json: { error: expect.stringContaining("Unable to open shared memory region: '/batchwise_no_such_object'") },
    });
    expect(await register('r', { key: inputKey, offset: 64, byte_size: 128 })).toMatchObject({
      status: 400,
      json: { error: expect.stringContaining("failed to register shared memory region 'r': offset 64 + byte_size 128 runs past the end") },
    });
    expect(await register('r', { key: '/../../etc/passwd', byte_size: 4 })).toMatchObject({
      status: 400,
      json: { error: expect.stringContaining('invalid key') },
    });
    expect(await register('r', { byte_size: 4 })).toMatchObject({
      status: 400,
      json: { error: expect.stringContaining("needs a string 'key'") },
    });
    expect(await register('r', { key: inputKey })).toMatchObject({
      status: 400,
      json: { error: expect.stringContaining("'byte_size' as a non-negative integer") },
    });
    expect(await register('input_data', { key: inputKey, byte_size: 128 })).toMatchObject({ status: 200 });
    expect(await register('input_data', { key: inputKey, byte_size: 128 })).toMatchObject({
      status: 400,
      json: { error: "shared memory region 'input_data' already in manager" },
    });
    expect(await getJson(`${server.url}/v2/systemsharedmemory/region/nope/status`)).toMatchObject({
      status: 404,
      json: { error: "Unable to find system shared memory region: 'nope'" },
    });

    const infer = (body: unknown) => postJson(`${server.url}/v2/models/simple/infer`, body);
    expect(
      await infer({
        inputs: [
          shmInput('INPUT0', 0),
          { ...shmInput('INPUT1', 0), parameters: { shared_memory_region: 'gone', shared_memory_byte_size: 64 } },
        ],
      }),
    ).toMatchObject({
      status: 404,
      json: { error: "input 'INPUT1': Unable to find shared memory region: 'gone'" },
    });
    expect(await infer({ inputs: [shmInput('INPUT0', 0), shmInput('INPUT1', 96)] })).toMatchObject({
      status: 400,
      json: { error: expect.stringContaining("input 'INPUT1': Invalid offset + byte size for shared memory region: 'input_data'") },
    });
    expect(
      await infer({
        inputs: [
          shmInput('INPUT0', 0),
          { ...shmInput('INPUT1', 64), parameters: { shared_memory_region: 'input_data', shared_memory_byte_size: 32 } },
        ],
      }),
    ).toMatchObject({
      status: 400,
      json: { error: "input 'INPUT1' has shared_memory_byte_size 32, but shape [1,16] of INT32 needs 64 bytes" },
    });
    expect(await infer({ inputs: [shmInput('INPUT0', 0), { ...shmInput('INPUT1', 64), data: new Array(16).fill(0) }] })).toMatchObject({
      status: 400,
      json: { error: expect.stringContaining("input 'INPUT1' is in shared memory region 'input_data' and must not also have 'data'") },
    });
    expect(
      await infer({
        inputs: [shmInput('INPUT0', 0), shmInput('INPUT1', 64)],
        outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_byte_size: 64 } }],
      }),
    ).toMatchObject({
      status: 400,
      json: { error: "output 'OUTPUT0' has shared_memory_byte_size or shared_memory_offset but no shared_memory_region" },
    });
    await register('small', { key: outputKey, byte_size: 16 });
    expect(
      await infer({
        inputs: [shmInput('INPUT0', 0), shmInput('INPUT1', 64)],
        outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'small', shared_memory_byte_size: 16 } }],
      }),
    ).toMatchObject({
      status: 400,
      json: {
        error:
          "shared memory size specified with the request for output 'OUTPUT0' (16 bytes) should be at least 64 bytes to hold the results",
      },
    });
    expect(
      await infer({
        inputs: [shmInput('INPUT0', 0), shmInput('INPUT1', 64)],
        outputs: [{ ...shmOutput('OUTPUT0', 0), parameters: { ...shmOutput('OUTPUT0', 0).parameters, binary_data: true } }],
      }),
    ).toMatchObject({
      status: 400,
      json: { error: expect.stringContaining("Output can't set both 'shared_memory_region' and 'binary_data'") },
    });
    // CUDA shared memory holds no region, answered as Triton answers while none is registered: its shared memory examples
    // unregister every CUDA region before they start, and must get on.
    expect(await getJson(`${server.url}/v2/cudasharedmemory/status`)).toMatchObject({ status: 200, json: [] });
    expect(await getJson(`${server.url}/v2/cudasharedmemory/region/input_data/status`)).toMatchObject({
      status: 404,
      json: { error: "The region named 'input_data' is registered as system shared memory, not CUDA shared memory" },
    });
    expect(await getJson(`${server.url}/v2/cudasharedmemory/region/nope/status`)).toMatchObject({
      status: 404,
      json: { error: "Unable to find cuda shared memory region: 'nope'" },
    });
    expect((await postJson(`${server.url}/v2/cudasharedmemory/unregister`, '')).status).toBe(200);
    expect((await postJson(`${server.url}/v2/cudasharedmemory/region/input_data/unregister`, '')).status).toBe(200);
    expect(
      await postJson(`${server.url}/v2/cudasharedmemory/region/gpu/register`, { raw_handle: { b64: 'AA==' }, device_id: 0, byte_size: 4 }),
    ).toMatchObject({
      status: 501,
      json: { error: expect.stringContaining('CUDA shared memory is not supported') },
    });
    // The system region of that name is still there.
    expect((await getJson(`${server.url}/v2/systemsharedmemory/region/input_data/status`)).status).toBe(200);

    const ok = await infer({ inputs: [shmInput('INPUT0', 0), shmInput('INPUT1', 64)] });
    expect(ok.status).toBe(200);
    expect(ok.json.outputs[0].data).toEqual([...SUM]);
    expect((await getJson(`${server.url}/v2/health/ready`)).status).toBe(200);
    const metadata = await getJson(`${server.url}/v2`);
    expect(metadata.json.extensions).toContain('system_shared_memory');
  });

  it('@batchwise/client over HTTP (binary and JSON) and gRPC: the same calls, the same results', async () => {
    const clients: [string, InferenceClient, boolean?][] = [
      ['http binary', new HttpClient({ url: server.url })],
      ['http json', new HttpClient({ url: server.url }), false],
      ['grpc', new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` })],
    ];
    try {
      for (const [label, client, binary] of clients) {
        await createObjects();
        await client.registerSystemSharedMemory('input_data', inputKey, 128);
        await client.registerSystemSharedMemory('output_data', outputKey, 64, 64);
        expect(await client.systemSharedMemoryStatus(), label).toEqual([
          { name: 'input_data', key: inputKey, offset: 0, byteSize: 128 },
          { name: 'output_data', key: outputKey, offset: 64, byteSize: 64 },
        ]);
        const result = await client.infer({
          model: 'simple',
          ...(binary !== undefined && { binary }),
          inputs: [
            { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], sharedMemory: { region: 'input_data', byteSize: 64 } },
            { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: INPUT1 },
          ],
          outputs: [{ name: 'OUTPUT0', sharedMemory: { region: 'output_data', byteSize: 64 } }, 'OUTPUT1'],
        });
        expect(
          result.outputs.map((o) => [o.name, o.shape, [...(o.data as Int32Array)]]),
          label,
        ).toEqual([
          ['OUTPUT0', [1, 16], []],
          ['OUTPUT1', [1, 16], [...DIFFERENCE]],
        ]);
        expect([...(await outputs()).output1], label).toEqual([...SUM]);
        await client.unregisterSystemSharedMemory('input_data');
        expect(await client.systemSharedMemoryStatus('output_data'), label).toHaveLength(1);
        await client.unregisterSystemSharedMemory();
        expect(await client.systemSharedMemoryStatus(), label).toEqual([]);
      }
    } finally {
      await Promise.all(clients.map(([, c]) => c.close()));
    }
  });

  describeWithTritonProtocol('gRPC, with a client built from the upstream protos', () => {
    let inference: AnyClient;
    const call = (method: string, request: unknown) => unaryCall(inference, method, request);
    beforeAll(() => {
      ({ inference } = upstreamClients(`127.0.0.1:${server.grpcPort}`));
    });
    afterAll(() => inference?.close());

    const grpcShm = (region: string, offset: number) => ({
      shared_memory_region: { string_param: region },
      shared_memory_byte_size: { int64_param: 64 },
      shared_memory_offset: { int64_param: offset },
    });

    it('register, status, infer through shared memory, unregister', async () => {
      await createObjects();
      expect(await call('SystemSharedMemoryRegister', { name: 'input_data', key: inputKey, offset: 0, byte_size: 128 })).toEqual({});
      expect(await call('SystemSharedMemoryRegister', { name: 'output_data', key: outputKey, offset: 0, byte_size: 128 })).toEqual({});
      expect(await call('SystemSharedMemoryStatus', { name: '' })).toEqual({
        regions: {
          input_data: { name: 'input_data', key: inputKey, offset: '0', byte_size: '128' },
          output_data: { name: 'output_data', key: outputKey, offset: '0', byte_size: '128' },
        },
      });
      const response = await call('ModelInfer', {
        model_name: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: grpcShm('input_data', 0) },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: grpcShm('input_data', 64) },
        ],
        outputs: [
          { name: 'OUTPUT0', parameters: grpcShm('output_data', 0) },
          { name: 'OUTPUT1', parameters: grpcShm('output_data', 64) },
        ],
      });
      expect(response.outputs.map((o: { name: string; shape: string[] }) => [o.name, o.shape])).toEqual([
        ['OUTPUT0', ['1', '16']],
        ['OUTPUT1', ['1', '16']],
      ]);
      // One (empty) raw entry per output, as Triton: clients index raw_output_contents by output.
      expect(response.raw_output_contents).toEqual([Buffer.alloc(0), Buffer.alloc(0)]);
      const { output0, output1 } = await outputs();
      expect([...output0]).toEqual([...SUM]);
      expect([...output1]).toEqual([...DIFFERENCE]);

      await expect(call('SystemSharedMemoryStatus', { name: 'nope' })).rejects.toMatchObject({ code: status.NOT_FOUND });
      await expect(
        call('SystemSharedMemoryRegister', { name: 'input_data', key: inputKey, offset: 0, byte_size: 128 }),
      ).rejects.toMatchObject({
        code: status.ALREADY_EXISTS,
      });
      expect(await call('SystemSharedMemoryUnregister', { name: 'input_data' })).toEqual({});
      expect(await call('SystemSharedMemoryUnregister', { name: '' })).toEqual({});
      expect(await call('SystemSharedMemoryStatus', { name: '' })).toEqual({ regions: {} });
    });

    it('a shared memory input takes no raw_input_contents entry; raw inputs still do', async () => {
      await createObjects();
      await call('SystemSharedMemoryRegister', { name: 'input_data', key: inputKey, offset: 0, byte_size: 128 });
      const response = await call('ModelInfer', {
        model_name: 'simple',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: grpcShm('input_data', 0) },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
        ],
        raw_input_contents: [bytesOf(INPUT1)],
      });
      expect(response.raw_output_contents[0]).toEqual(bytesOf(SUM));
      await expect(
        call('ModelInfer', {
          model_name: 'simple',
          inputs: [
            { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: grpcShm('nope', 0) },
            { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
          ],
          raw_input_contents: [bytesOf(INPUT1)],
        }),
      ).rejects.toMatchObject({ code: status.NOT_FOUND, details: "input 'INPUT0': Unable to find shared memory region: 'nope'" });
    });
  });
});
