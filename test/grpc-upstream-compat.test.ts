/**
 * Drives the gRPC frontend with a grpc-js client built from Triton's own .proto files, as
 * an existing Triton client would: every RPC, every datatype in raw and typed contents,
 * and the errors. Needs Triton's protocol files (TRITON_PROTOCOL_DIR: skipped without them, failed in CI).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configPbtxt, identity, type TensorDatatype } from '@batchwise/modelgen';
import { EXAMPLES, makeRepository } from './support/repository.ts';
import { startTestServer } from './support/server.ts';
import { describeWithTritonProtocol, status, unaryCall, upstreamClients, type AnyClient } from './support/upstream-grpc.ts';

const bytesOf = (view: ArrayBufferView) => Buffer.from(view.buffer, view.byteOffset, view.byteLength);
const lengthPrefixed = (elements: Buffer[]) => Buffer.concat(elements.flatMap((e) => [bytesOf(Uint32Array.of(e.length)), e]));

/** Four elements of each datatype, as typed contents and as the raw bytes they must become. */
const SAMPLES: Record<TensorDatatype, { field?: string; typed?: unknown[]; raw: Buffer }> = {
  BOOL: { field: 'bool_contents', typed: [true, false, true, false], raw: Buffer.from([1, 0, 1, 0]) },
  UINT8: { field: 'uint_contents', typed: [0, 1, 254, 255], raw: Buffer.from([0, 1, 254, 255]) },
  UINT16: { field: 'uint_contents', typed: [0, 1, 65534, 65535], raw: bytesOf(Uint16Array.of(0, 1, 65534, 65535)) },
  UINT32: { field: 'uint_contents', typed: [0, 1, 2 ** 32 - 2, 2 ** 32 - 1], raw: bytesOf(Uint32Array.of(0, 1, 2 ** 32 - 2, 2 ** 32 - 1)) },
  UINT64: {
    field: 'uint64_contents',
    typed: ['0', '1', '18446744073709551614', '18446744073709551615'],
    raw: bytesOf(BigUint64Array.of(0n, 1n, 2n ** 64n - 2n, 2n ** 64n - 1n)),
  },
  INT8: { field: 'int_contents', typed: [-128, -1, 0, 127], raw: bytesOf(Int8Array.of(-128, -1, 0, 127)) },
  INT16: { field: 'int_contents', typed: [-32768, -1, 0, 32767], raw: bytesOf(Int16Array.of(-32768, -1, 0, 32767)) },
  INT32: { field: 'int_contents', typed: [-(2 ** 31), -1, 0, 2 ** 31 - 1], raw: bytesOf(Int32Array.of(-(2 ** 31), -1, 0, 2 ** 31 - 1)) },
  INT64: {
    field: 'int64_contents',
    typed: ['-9223372036854775808', '-1', '9007199254740993', '9223372036854775807'],
    raw: bytesOf(BigInt64Array.of(-(2n ** 63n), -1n, 9007199254740993n, 2n ** 63n - 1n)),
  },
  FP16: { raw: bytesOf(Uint16Array.of(0x3c00, 0xc000, 0, 0x7bff)) },
  FP32: { field: 'fp32_contents', typed: [1.5, -2.25, 0, Math.fround(3.4e38)], raw: bytesOf(Float32Array.of(1.5, -2.25, 0, 3.4e38)) },
  FP64: { field: 'fp64_contents', typed: [Math.PI, -1e300, 0, 5e-324], raw: bytesOf(Float64Array.of(Math.PI, -1e300, 0, 5e-324)) },
  BYTES: {
    field: 'bytes_contents',
    // Text only: ONNX Runtime string tensors cannot hold arbitrary bytes.
    typed: [Buffer.from('a'), Buffer.alloc(0), Buffer.from('\u{1F600}'), Buffer.from('héllo')],
    raw: lengthPrefixed([Buffer.from('a'), Buffer.alloc(0), Buffer.from('\u{1F600}'), Buffer.from('héllo')]),
  },
};
const DATATYPES = Object.keys(SAMPLES) as TensorDatatype[];
const modelOf = (dt: TensorDatatype) => `id_${dt.toLowerCase()}`;

describeWithTritonProtocol('gRPC frontend driven by a client built from the upstream Triton protos', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let inference: AnyClient;
  let health: AnyClient;
  const call = (method: string, request: unknown, client: AnyClient = inference) => unaryCall(client, method, request);

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
    server = await startTestServer([EXAMPLES, repo.dir]);
    ({ inference, health } = upstreamClients(`127.0.0.1:${server.grpcPort}`));
  });
  afterAll(async () => {
    inference?.close();
    health?.close();
    await server?.close();
    await repo?.remove();
  });

  it('health and metadata RPCs', async () => {
    expect(await call('ServerLive', {})).toEqual({ live: true });
    expect(await call('ServerReady', {})).toEqual({ ready: true });
    expect(await call('ModelReady', { name: 'simple', version: '' })).toEqual({ ready: true });
    expect(await call('ModelReady', { name: 'nope' })).toEqual({ ready: false });
    expect(await call('ServerMetadata', {})).toMatchObject({
      name: 'batchwise',
      extensions: expect.arrayContaining(['binary_tensor_data']),
    });
    expect(await call('ModelMetadata', { name: 'simple', version: '1' })).toEqual({
      name: 'simple',
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: ['-1', '16'] },
        { name: 'INPUT1', datatype: 'INT32', shape: ['-1', '16'] },
      ],
      outputs: [
        { name: 'OUTPUT0', datatype: 'INT32', shape: ['-1', '16'] },
        { name: 'OUTPUT1', datatype: 'INT32', shape: ['-1', '16'] },
      ],
    });
    await expect(call('ModelMetadata', { name: 'nope' })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT });
    expect(await call('Check', { service: '' }, health)).toEqual({ status: 'SERVING' });
    expect(await call('Check', { service: 'id_fp32' }, health)).toEqual({ status: 'SERVING' });
    await expect(call('Check', { service: 'nope' }, health)).rejects.toMatchObject({ code: status.NOT_FOUND });
  });

  it('ModelConfig decodes with upstream model_config.proto', async () => {
    const { config } = await call('ModelConfig', { name: 'simple' });
    expect(config).toMatchObject({ name: 'simple', platform: 'onnxruntime_onnx', max_batch_size: 8 });
    expect(config.input[0]).toMatchObject({ name: 'INPUT0', data_type: 'TYPE_INT32', dims: ['16'] });
    expect(config.dynamic_batching).toMatchObject({ max_queue_delay_microseconds: '100' });
    expect(config.instance_group[0]).toMatchObject({ kind: 'KIND_CPU', count: 1 });
  });

  describe.each(DATATYPES)('%s identity', (dt) => {
    const sample = SAMPLES[dt];
    const input = { name: 'INPUT0', datatype: dt, shape: [1, 4] };

    it('raw_input_contents in, raw_output_contents out', async () => {
      const r = await call('ModelInfer', { model_name: modelOf(dt), id: `raw-${dt}`, inputs: [input], raw_input_contents: [sample.raw] });
      expect(r).toMatchObject({ model_name: modelOf(dt), model_version: '1', id: `raw-${dt}` });
      expect(r.outputs).toEqual([{ name: 'OUTPUT0', datatype: dt, shape: ['1', '4'], parameters: {}, contents: null }]);
      expect(r.raw_output_contents).toHaveLength(1);
      expect(r.raw_output_contents[0]).toEqual(sample.raw);
    });

    if (sample.field) {
      it(`typed ${sample.field} in, the same raw bytes out`, async () => {
        const r = await call('ModelInfer', {
          model_name: modelOf(dt),
          inputs: [{ ...input, contents: { [sample.field!]: sample.typed } }],
        });
        expect(r.raw_output_contents[0]).toEqual(sample.raw);
      });
    } else {
      it('has no typed field: typed contents are refused', async () => {
        await expect(
          call('ModelInfer', { model_name: modelOf(dt), inputs: [{ ...input, contents: { fp32_contents: [1, 2, 3, 4] } }] }),
        ).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: expect.stringContaining('must be sent in raw_input_contents') });
      });
    }
  });

  it('BF16 (no typed field) must travel raw', async () => {
    await expect(
      call('ModelInfer', {
        model_name: 'id_fp16',
        inputs: [{ name: 'INPUT0', datatype: 'BF16', shape: [1, 1], contents: { fp32_contents: [1] } }],
      }),
    ).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: expect.stringContaining('BF16') });
  });

  it('request parameters, requested outputs and typed-contents errors', async () => {
    const inputs = ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16] }));
    const raw = [bytesOf(Int32Array.from({ length: 16 }, (_, i) => i)), bytesOf(new Int32Array(16).fill(2))];
    const r = await call('ModelInfer', {
      model_name: 'simple',
      inputs,
      raw_input_contents: raw,
      outputs: [{ name: 'OUTPUT1' }],
      parameters: { priority: { uint64_param: 0 }, timeout: { int64_param: 1_000_000 } },
    });
    expect(r.outputs.map((o: { name: string }) => o.name)).toEqual(['OUTPUT1']);
    expect([...new Int32Array(new Uint8Array(r.raw_output_contents[0]).buffer)]).toEqual(Array.from({ length: 16 }, (_, i) => i - 2));

    const expectInvalid = (request: unknown, message: string | RegExp) =>
      expect(call('ModelInfer', request)).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: expect.stringMatching(message) });
    await expectInvalid(
      { model_name: 'simple', inputs, raw_input_contents: [raw[0]] },
      /raw_input_contents has 1 entries but the request has 2 inputs/,
    );
    await expectInvalid(
      { model_name: 'simple', inputs: [{ ...inputs[0], contents: { int_contents: [1] } }, inputs[1]], raw_input_contents: raw },
      /input 'INPUT0' has contents while raw_input_contents is used/,
    );
    await expectInvalid(
      { model_name: 'simple', inputs: inputs.map((i) => ({ ...i, contents: { fp32_contents: new Array(16).fill(1) } })) },
      /has data in 'fp32_contents'; INT32 elements belong in 'int_contents'/,
    );
    await expectInvalid({ model_name: 'simple', inputs: inputs.map((i) => ({ ...i, contents: { int_contents: [1, 2] } })) }, /INPUT0/);
    await expectInvalid(
      { model_name: 'simple', inputs: [{ ...inputs[0], datatype: 'INT33' }], raw_input_contents: [raw[0]] },
      /invalid datatype 'INT33'/,
    );
    await expectInvalid({ model_name: 'simple', inputs }, /input 'INPUT0' has no data/);
    await expect(
      call('ModelInfer', {
        model_name: 'simple',
        inputs: inputs.map((i) => ({ ...i, parameters: { shared_memory_region: { string_param: 'r' } } })),
      }),
    ).rejects.toMatchObject({
      code: status.INVALID_ARGUMENT,
      details: "input 'INPUT0': shared_memory_region 'r' needs shared_memory_byte_size",
    });
    expect(await call('ServerReady', {})).toEqual({ ready: true });
  });

  it('ModelStreamInfer: responses by id, error_message for bad requests, stream goes on', async () => {
    const stream = inference['ModelStreamInfer']!.call(inference);
    const responses: any[] = [];
    const ended = new Promise<void>((resolve, reject) => {
      stream.on('data', (m: unknown) => responses.push(m));
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    const ok = (id: string) => ({
      model_name: 'id_int32',
      id,
      inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 4] }],
      raw_input_contents: [SAMPLES.INT32.raw],
    });
    stream.write(ok('s1'));
    stream.write({ model_name: 'nope', id: 's2' });
    stream.write({ ...ok('s3'), raw_input_contents: [Buffer.alloc(3)] });
    stream.write(ok('s4'));
    stream.end();
    await ended;
    const byId = new Map(responses.map((r) => [r.infer_response?.id, r]));
    expect(responses).toHaveLength(4);
    for (const id of ['s1', 's4']) {
      expect(byId.get(id).error_message).toBe('');
      expect(byId.get(id).infer_response.raw_output_contents[0]).toEqual(SAMPLES.INT32.raw);
    }
    expect(byId.get('s2').error_message).toBe("Request for unknown model: 'nope' is not found");
    expect(byId.get('s3').error_message).toMatch(
      /^input byte size mismatch for input 'INPUT0' for model '[a-z_0-9]+'. Expected \d+, got 3: /,
    );
  });

  it('statistics, repository and settings RPCs', async () => {
    const { model_stats } = await call('ModelStatistics', { name: 'id_int32', version: '' });
    expect(model_stats).toHaveLength(1);
    expect(model_stats[0]).toMatchObject({ name: 'id_int32', version: '1' });
    expect(Number(model_stats[0].inference_count)).toBeGreaterThan(0);
    expect(Number(model_stats[0].inference_stats.success.count)).toBeGreaterThan(0);
    expect(Number(model_stats[0].inference_stats.success.ns)).toBeGreaterThan(0);
    expect(model_stats[0].batch_stats.length).toBeGreaterThan(0);

    const { models } = await call('RepositoryIndex', { repository_name: '', ready: true });
    expect(models.map((m: { name: string }) => m.name)).toEqual(expect.arrayContaining(['simple', 'id_bytes']));
    // Model control mode NONE, as Triton: UNAVAILABLE.
    await expect(call('RepositoryModelLoad', { model_name: 'simple' })).rejects.toMatchObject({ code: status.UNAVAILABLE });
    await expect(call('RepositoryModelUnload', { model_name: 'simple' })).rejects.toMatchObject({ code: status.UNAVAILABLE });
    // File overrides too: as in Triton, the control mode is checked before the parameters.
    await expect(
      call('RepositoryModelLoad', { model_name: 'simple', parameters: { 'file:1/model.onnx': { bytes_param: Buffer.alloc(1) } } }),
    ).rejects.toMatchObject({
      code: status.UNAVAILABLE,
    });

    const log = await call('LogSettings', {});
    expect(Object.keys(log.settings).sort()).toEqual([
      'log_error',
      'log_file',
      'log_format',
      'log_info',
      'log_verbose_level',
      'log_warning',
    ]);
    expect((await call('TraceSetting', {})).settings.trace_level).toEqual({ value: ['OFF'] });
    // CUDA shared memory holds no region (answered as Triton answers while none is registered); registering one is not supported.
    expect(await call('CudaSharedMemoryStatus', {})).toEqual({ regions: {} });
    await expect(call('CudaSharedMemoryStatus', { name: 'nope' })).rejects.toMatchObject({
      code: status.NOT_FOUND,
      details: "Unable to find cuda shared memory region: 'nope'",
    });
    expect(await call('CudaSharedMemoryUnregister', {})).toEqual({});
    expect(await call('CudaSharedMemoryUnregister', { name: 'nope' })).toEqual({});
    await expect(
      call('CudaSharedMemoryRegister', { name: 'gpu', raw_handle: Buffer.alloc(64), device_id: 0, byte_size: 4 }),
    ).rejects.toMatchObject({
      code: status.UNIMPLEMENTED,
      details: expect.stringContaining('CUDA shared memory is not supported'),
    });
  });
});
