import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity, TENSOR_DATATYPES } from '@batchwise/modelgen';
import { EXAMPLES, makeRepository } from './support/repository.ts';
import { isReady, postBinary, postJson, splitBinaryResponse, startTestServer, getJson } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const INPUT0 = Array.from({ length: 16 }, (_, i) => i);
const INPUT1 = Array.from({ length: 16 }, () => 1);

describe('HTTP inference on the example repository', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startTestServer([EXAMPLES]);
  });
  afterAll(() => server.close());

  it('is live and ready once every example model loaded', async () => {
    expect((await fetch(`${server.url}/v2/health/live`)).status).toBe(200);
    expect(await isReady(server.url)).toBe(true);
  });

  it('answers server and model metadata', async () => {
    const meta = await getJson(`${server.url}/v2`);
    expect(meta.name).toBe('batchwise');
    expect(meta.extensions).toContain('binary_tensor_data');
    const simple = await getJson(`${server.url}/v2/models/simple`);
    expect(simple).toMatchObject({
      name: 'simple',
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] },
        { name: 'INPUT1', datatype: 'INT32', shape: [-1, 16] },
      ],
      outputs: [
        { name: 'OUTPUT0', datatype: 'INT32', shape: [-1, 16] },
        { name: 'OUTPUT1', datatype: 'INT32', shape: [-1, 16] },
      ],
      parameters: { execution_provider: 'CPUExecutionProvider' },
    });
    expect((await fetch(`${server.url}/v2/models/simple/versions/1/ready`)).status).toBe(200);
    expect((await fetch(`${server.url}/v2/models/simple/versions/7/ready`)).status).toBe(400);
  });

  it('returns the config, completed for the model without config.pbtxt', async () => {
    const config = await getJson(`${server.url}/v2/models/simple/config`);
    expect(config).toMatchObject({ name: 'simple', max_batch_size: 8, runtime: '', batch_input: [], metric_tags: {} });
    // Every primitive field of a present message, as Triton's protobuf JSON printer writes it.
    expect(config.input[0]).toEqual({
      name: 'INPUT0',
      data_type: 'TYPE_INT32',
      format: 'FORMAT_NONE',
      dims: [16],
      is_shape_tensor: false,
      allow_ragged_batch: false,
      optional: false,
      is_non_linear_format_io: false,
    });
    expect(config.instance_group).toEqual([
      { name: 'simple_0', kind: 'KIND_CPU', count: 1, gpus: [], secondary_devices: [], profile: [], passive: false, host_policy: '' },
    ]);
    const auto = await getJson(`${server.url}/v2/models/autocomplete_fp32/config`);
    expect(auto).toMatchObject({ name: 'autocomplete_fp32', max_batch_size: 4 });
    expect(auto.dynamic_batching).toEqual({
      preferred_batch_size: [],
      max_queue_delay_microseconds: 0,
      preserve_ordering: false,
      priority_levels: 0,
      default_priority_level: 0,
      priority_queue_policy: {},
    });
    expect(auto.input[0]).toMatchObject({ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [4] });
  });

  it('adds and subtracts with JSON tensors (nested and flat data)', async () => {
    const { status, json } = await postJson(`${server.url}/v2/models/simple/infer`, {
      id: 'req-1',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: [INPUT0] },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: INPUT1 },
      ],
    });
    expect(status).toBe(200);
    expect(json).toMatchObject({ model_name: 'simple', model_version: '1', id: 'req-1' });
    const out = Object.fromEntries(json.outputs.map((o: any) => [o.name, o]));
    expect(out.OUTPUT0).toMatchObject({ datatype: 'INT32', shape: [1, 16], data: INPUT0.map((x) => x + 1) });
    expect(out.OUTPUT1.data).toEqual(INPUT0.map((x) => x - 1));
  });

  it('decodes percent-escapes in the model name and version of the infer path, and refuses a malformed one', async () => {
    const body = {
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: INPUT0 },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: INPUT1 },
      ],
    };
    const escaped = await postJson(`${server.url}/v2/models/s%69mple/versions/%31/infer`, body);
    expect(escaped.status).toBe(200);
    expect(escaped.json).toMatchObject({ model_name: 'simple', model_version: '1' });
    const malformed = await postJson(`${server.url}/v2/models/simple%E0%A4%A/infer`, body);
    expect(malformed.status).toBeGreaterThanOrEqual(400);
    expect(malformed.status).toBeLessThan(500);
    expect((await postJson(`${server.url}/v2/models/simple/infer`, body)).status).toBe(200);
  });

  it('gives the same numbers in the binary tensor extension, and filters outputs', async () => {
    const a = Int32Array.from(INPUT0);
    const b = Int32Array.from(INPUT1);
    const response = await postBinary(
      `${server.url}/v2/models/simple/infer`,
      {
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
        ],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
      },
      [new Uint8Array(a.buffer), new Uint8Array(b.buffer)],
    );
    expect(response.status).toBe(200);
    const { json, binary } = splitBinaryResponse(response);
    expect(json.outputs).toHaveLength(1);
    expect(json.outputs[0]).toMatchObject({ name: 'OUTPUT0', shape: [1, 16], parameters: { binary_data_size: 64 } });
    const sums = new Int32Array(binary.buffer.slice(binary.byteOffset, binary.byteOffset + 64));
    expect([...sums]).toEqual(INPUT0.map((x) => x + 1));
  });

  it('returns every output binary when binary_data_output is set', async () => {
    const response = await postBinary(
      `${server.url}/v2/models/simple/infer`,
      {
        parameters: { binary_data_output: true },
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: INPUT1 },
        ],
      },
      [new Uint8Array(Int32Array.from(INPUT0).buffer)],
    );
    const { json, binary } = splitBinaryResponse(response);
    expect(json.outputs.map((o: any) => o.parameters.binary_data_size)).toEqual([64, 64]);
    expect(binary.length).toBe(128);
  });

  it('round-trips BYTES through the identity model in JSON and binary', async () => {
    const { status, json } = await postJson(`${server.url}/v2/models/identity_bytes/infer`, {
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [2, 1], data: ['hello', 'wörld'] }],
    });
    expect(status).toBe(200);
    expect(json.outputs[0]).toMatchObject({ datatype: 'BYTES', shape: [2, 1], data: ['hello', 'wörld'] });
  });

  it('reads and changes the log settings (logging extension)', async () => {
    const level = server.logger.level;
    try {
      const current = await getJson(`${server.url}/v2/logging`);
      expect(Object.keys(current).sort()).toEqual(['log_error', 'log_file', 'log_format', 'log_info', 'log_verbose_level', 'log_warning']);
      const verbose = await postJson(`${server.url}/v2/logging`, { log_verbose_level: 1 });
      expect(verbose).toMatchObject({ status: 200, json: { log_verbose_level: 1, log_info: true, log_warning: true, log_error: true } });
      expect(server.logger.level).toBe('debug');
      expect((await postJson(`${server.url}/v2/logging`, { log_verbose_level: 0, log_info: false })).json).toMatchObject({
        log_info: false,
        log_warning: true,
      });
      expect(server.logger.level).toBe('warn');
      expect(await postJson(`${server.url}/v2/logging`, { log_info: 'yes' })).toMatchObject({
        status: 400,
        json: { error: "log setting 'log_info' needs a boolean value" },
      });
      expect(await postJson(`${server.url}/v2/logging`, { log_bogus: true })).toMatchObject({
        status: 400,
        json: { error: expect.stringContaining("unknown log setting 'log_bogus'") },
      });
      expect(await postJson(`${server.url}/v2/logging`, { log_file: '/tmp/x.log' })).toMatchObject({ status: 501 });
      expect(server.logger.level).toBe('warn');
    } finally {
      server.logger.level = level;
    }
  });

  it('keeps idle connections open longer than an AWS ALB does (60 s), so the ALB never reuses a closing one', async () => {
    const response = await fetch(`${server.url}/v2/health/live`);
    expect(response.headers.get('connection')).toBe('keep-alive');
    expect(response.headers.get('keep-alive')).toBe('timeout=65');
  });

  it('exports Triton metrics after traffic', async () => {
    const text = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
    // The five requests to 'simple' above that reached it, one sample each, none failed (the malformed escape never did).
    expect(text).toContain('nv_inference_request_success{model="simple",version="1"} 5\n');
    expect(text).toContain('nv_inference_count{model="simple",version="1"} 5\n');
    expect(text).toContain('nv_inference_exec_count{model="simple",version="1"} 5\n');
    expect(text).toContain('nv_inference_request_failure{model="simple",reason="OTHER",version="1"} 0\n');
    expect(text).toMatch(/^nv_inference_compute_infer_duration_us\{model="simple",version="1"\} [1-9]\d*$/m);
    expect(text).toContain('batchwise_inference_request_duration_seconds_bucket');
    expect(text).toMatch(/nv_cpu_memory_used_bytes [1-9]/);
  });
});

describe('a configured HTTP keep-alive timeout', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startTestServer([], { httpKeepAliveTimeoutMs: 1500 });
  });
  afterAll(() => server.close());

  it('is announced in Keep-Alive and closes an idle connection after it', async () => {
    const socket = connect(server.httpPort, '127.0.0.1');
    let reply = '';
    socket.on('data', (d) => (reply += d));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write('GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n');
    await closed;
    expect(reply).toMatch(/^HTTP\/1.1 200/);
    expect(reply).toMatch(/\r\nKeep-Alive: timeout=1\r\n/i);
  });
});

describe('statistics and metrics after known traffic', () => {
  let server: Server;
  let removeRepo: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([
      {
        name: 'counted',
        model: identity('FP32', [4]),
        config: `name: "counted"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { }`,
      },
    ]);
    removeRepo = repo.remove;
    server = await startTestServer([repo.dir]);
  });
  afterAll(async () => {
    await server.close();
    await removeRepo();
  });

  const infer = (rows: number, width = 4) =>
    postJson(`${server.url}/v2/models/counted/infer`, {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [rows, width], data: new Array(rows * width).fill(0.5) }],
    });

  it("pins Triton's statistics JSON and the nv_inference_* values", async () => {
    const before = Date.now();
    // One after another, so each request runs as its own batch: 3 of 1 sample, 2 of 2, and one refused.
    for (const rows of [1, 1, 2, 1, 2]) expect((await infer(rows)).status).toBe(200);
    expect((await infer(1, 3)).status).toBe(400);
    const after = Date.now();

    const stats = await getJson(`${server.url}/v2/models/counted/stats`);
    const duration = (count: number) => ({ count, ns: count === 0 ? 0 : expect.any(Number) });
    const compute = (count: number) => ({
      compute_input: duration(count),
      compute_infer: duration(count),
      compute_output: duration(count),
    });
    expect(stats).toEqual({
      model_stats: [
        {
          name: 'counted',
          version: '1',
          last_inference: expect.any(Number),
          inference_count: 7,
          execution_count: 5,
          inference_stats: {
            success: duration(5),
            fail: duration(1),
            queue: duration(5),
            ...compute(5),
            cache_hit: duration(0),
            cache_miss: duration(0),
          },
          batch_stats: [
            { batch_size: 1, ...compute(3) },
            { batch_size: 2, ...compute(2) },
          ],
          memory_usage: [],
          response_stats: {},
        },
      ],
    });
    const entry = stats.model_stats[0];
    // last_inference is milliseconds since the epoch; durations are whole nanoseconds.
    expect(entry.last_inference).toBeGreaterThanOrEqual(before);
    expect(entry.last_inference).toBeLessThanOrEqual(after);
    const durations = [
      ...Object.values(entry.inference_stats),
      ...entry.batch_stats.flatMap((b: any) => [b.compute_input, b.compute_infer, b.compute_output]),
    ];
    for (const d of durations as { ns: number }[]) expect(Number.isInteger(d.ns)).toBe(true);
    expect(entry.inference_stats.success.ns).toBeGreaterThan(0);

    const text = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
    // Labels sorted by name, as Triton writes them: model, [reason,] version.
    const value = (name: string, reason?: string) => {
      const labels = `model="counted",${reason ? `reason="${reason}",` : ''}version="1"`;
      const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
      return line === undefined ? undefined : line.slice(line.lastIndexOf(' ') + 1);
    };
    expect(value('nv_inference_request_success')).toBe('5');
    expect(value('nv_inference_count')).toBe('7');
    expect(value('nv_inference_exec_count')).toBe('5');
    expect(value('nv_inference_pending_request_count')).toBe('0');
    expect(['REJECTED', 'CANCELED', 'BACKEND', 'OTHER'].map((r) => value('nv_inference_request_failure', r))).toEqual(['0', '0', '0', '1']);
    for (const name of ['request', 'queue', 'compute_input', 'compute_infer', 'compute_output']) {
      expect(value(`nv_inference_${name}_duration_us`)).toMatch(/^\d+$/);
    }
    expect(Number(value('nv_inference_request_duration_us'))).toBeGreaterThan(0);
  });
});

const DATATYPES = TENSOR_DATATYPES;

function sampleData(datatype: (typeof DATATYPES)[number]): { json: unknown[] | undefined; bytes: Uint8Array } {
  switch (datatype) {
    case 'BOOL':
      return { json: [true, false, true, true], bytes: Uint8Array.from([1, 0, 1, 1]) };
    case 'UINT8':
      return { json: [0, 1, 254, 255], bytes: Uint8Array.from([0, 1, 254, 255]) };
    case 'INT8':
      return { json: [-128, -1, 0, 127], bytes: new Uint8Array(Int8Array.from([-128, -1, 0, 127]).buffer) };
    case 'UINT16':
      return { json: [0, 1, 65534, 65535], bytes: new Uint8Array(Uint16Array.from([0, 1, 65534, 65535]).buffer) };
    case 'INT16':
      return { json: [-32768, -1, 0, 32767], bytes: new Uint8Array(Int16Array.from([-32768, -1, 0, 32767]).buffer) };
    case 'UINT32':
      return { json: [0, 1, 4294967294, 4294967295], bytes: new Uint8Array(Uint32Array.from([0, 1, 4294967294, 4294967295]).buffer) };
    case 'INT32':
      return { json: [-2147483648, -1, 0, 2147483647], bytes: new Uint8Array(Int32Array.from([-2147483648, -1, 0, 2147483647]).buffer) };
    case 'UINT64':
      return {
        json: [0, 1, 2 ** 40, Number.MAX_SAFE_INTEGER],
        bytes: new Uint8Array(BigUint64Array.from([0n, 1n, 2n ** 40n, 2n ** 53n - 1n]).buffer),
      };
    case 'INT64':
      return {
        json: [-(2 ** 40), -1, 0, Number.MAX_SAFE_INTEGER],
        bytes: new Uint8Array(BigInt64Array.from([-(2n ** 40n), -1n, 0n, 2n ** 53n - 1n]).buffer),
      };
    case 'FP16':
      // 1.0, -2.0, 0.5, 65504 as IEEE half bit patterns; FP16 travels binary only.
      return { json: undefined, bytes: new Uint8Array(Uint16Array.from([0x3c00, 0xc000, 0x3800, 0x7bff]).buffer) };
    case 'FP32':
      return { json: [1.5, -2.25, 0, 2 ** 100], bytes: new Uint8Array(Float32Array.from([1.5, -2.25, 0, 2 ** 100]).buffer) };
    case 'FP64':
      return { json: [1.5, -2.25, 1e-300, 1e300], bytes: new Uint8Array(Float64Array.from([1.5, -2.25, 1e-300, 1e300]).buffer) };
    case 'BYTES': {
      const parts = ['a', '', 'zwölf', 'x'.repeat(300)].map((s) => Buffer.from(s));
      const framed = parts.flatMap((p) => {
        const len = Buffer.alloc(4);
        len.writeUInt32LE(p.length);
        return [len, p];
      });
      return { json: ['a', '', 'zwölf', 'x'.repeat(300)], bytes: new Uint8Array(Buffer.concat(framed)) };
    }
  }
}

describe('every datatype through JSON and binary', () => {
  let server: Server;
  let removeRepo: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository(DATATYPES.map((dt) => ({ name: `id_${dt.toLowerCase()}`, model: identity(dt, [4]) })));
    removeRepo = repo.remove;
    server = await startTestServer([repo.dir]);
  });
  afterAll(async () => {
    await server.close();
    await removeRepo();
  });

  it("writes NaN and ±Infinity outputs as Triton's NaN, Infinity, -Infinity tokens (not null)", async () => {
    const response = await postBinary(
      `${server.url}/v2/models/id_fp32/infer`,
      { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], parameters: { binary_data_size: 16 } }] },
      [new Uint8Array(new Float32Array([NaN, Infinity, -Infinity, 1.5]).buffer)],
    );
    expect(response.status).toBe(200);
    expect(response.body.toString()).toContain('"data":[NaN,Infinity,-Infinity,1.5]');
  });

  it('stores an FP32 JSON input beyond the float range as ±Infinity, as Triton casts it', async () => {
    const response = await fetch(`${server.url}/v2/models/id_fp32/infer`, {
      method: 'POST',
      body: '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,4],"data":[1e39,-1e39,3.4e38,0.1]}]}',
    });
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('"data":[Infinity,-Infinity,3.3999999521443642e+38,0.10000000149011612]');
  });

  it('round-trips 64-bit integers beyond 2^53 exactly through JSON, both ways', async () => {
    for (const [datatype, data] of [
      ['INT64', '[9007199254740993,-9223372036854775808,9223372036854775807,-1]'],
      ['UINT64', '[18446744073709551615,9007199254740993,0,1]'],
    ] as const) {
      const response = await fetch(`${server.url}/v2/models/id_${datatype.toLowerCase()}/infer`, {
        method: 'POST',
        body: `{"inputs":[{"name":"INPUT0","datatype":"${datatype}","shape":[1,4],"data":${data}}]}`,
      });
      const text = await response.text();
      expect(response.status, text).toBe(200);
      expect(text).toContain(`"data":${data}`);
    }
    const beyond = await postJson(
      `${server.url}/v2/models/id_int64/infer`,
      '{"inputs":[{"name":"INPUT0","datatype":"INT64","shape":[1,4],"data":[9223372036854775808,0,0,0]}]}',
    );
    expect(beyond.status).toBe(400);
    expect(beyond.json.error).toMatch(
      /element 0 of input 'INPUT0' is not a valid INT64: expected an integer in \[-9223372036854775808, 9223372036854775807\]/,
    );
    expect(beyond.json.error).not.toContain('9223372036854775808)');
  });

  it('reads the NaN and Infinity tokens Python clients write in FP32 JSON inputs', async () => {
    const response = await fetch(`${server.url}/v2/models/id_fp32/infer`, {
      method: 'POST',
      body: '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,4],"data":[NaN,Infinity,-Infinity,2]}]}',
    });
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('"data":[NaN,Infinity,-Infinity,2]');
  });

  it('writes 64-bit integer outputs exactly in JSON', async () => {
    const values = [2n ** 53n + 1n, -(2n ** 63n), 2n ** 63n - 1n, 0n];
    const response = await postBinary(
      `${server.url}/v2/models/id_int64/infer`,
      { inputs: [{ name: 'INPUT0', datatype: 'INT64', shape: [1, 4], parameters: { binary_data_size: 32 } }] },
      [new Uint8Array(new BigInt64Array(values).buffer)],
    );
    expect(response.status).toBe(200);
    expect(response.body.toString()).toContain('"data":[9007199254740993,-9223372036854775808,9223372036854775807,0]');
  });

  for (const datatype of DATATYPES) {
    const sample = sampleData(datatype);
    it(`${datatype} in binary`, async () => {
      const response = await postBinary(
        `${server.url}/v2/models/id_${datatype.toLowerCase()}/infer`,
        {
          inputs: [{ name: 'INPUT0', datatype, shape: [1, 4], parameters: { binary_data_size: sample.bytes.length } }],
          outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
        },
        [sample.bytes],
      );
      expect(response.status, response.body.toString()).toBe(200);
      const { json, binary } = splitBinaryResponse(response);
      expect(json.outputs[0]).toMatchObject({ name: 'OUTPUT0', datatype, shape: [1, 4] });
      expect(Buffer.compare(binary, Buffer.from(sample.bytes))).toBe(0);
    });
    if (sample.json) {
      it(`${datatype} in JSON`, async () => {
        const { status, json } = await postJson(`${server.url}/v2/models/id_${datatype.toLowerCase()}/infer`, {
          inputs: [{ name: 'INPUT0', datatype, shape: [1, 4], data: sample.json }],
        });
        expect(status, JSON.stringify(json)).toBe(200);
        expect(json.outputs[0]).toMatchObject({ datatype, shape: [1, 4], data: sample.json });
      });
    } else {
      it(`${datatype} in JSON is refused: it travels binary only`, async () => {
        const { status, json } = await postJson(`${server.url}/v2/models/id_${datatype.toLowerCase()}/infer`, {
          inputs: [{ name: 'INPUT0', datatype, shape: [1, 4], data: [1, 2, 3, 4] }],
        });
        expect(status).toBe(400);
        expect(json.error).toContain('INPUT0');
        expect(await isReady(server.url)).toBe(true);
      });
    }
  }
});
