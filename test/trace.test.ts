/**
 * Triton's trace extension end to end: settings over HTTP and gRPC (global and per model),
 * and the trace file a traced request leaves, with its timestamps in order.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLES } from './support/repository.ts';
import { postJson, startTestServer } from './support/server.ts';
import { describeWithTritonProtocol, status, unaryCall, upstreamClients, type AnyClient } from './support/upstream-grpc.ts';

const INFER = {
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Array(16).fill(1) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Array(16).fill(2) },
  ],
};
const ORDER = ['REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END', 'REQUEST_END'];

describe('trace extension', () => {
  let dir: string;
  let server: Awaited<ReturnType<typeof startTestServer>>;
  const traceFile = () => join(dir, 'trace.json');
  const get = async (path: string): Promise<any> => (await fetch(`${server.url}${path}`)).json();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batchwise-trace-'));
    server = await startTestServer([EXAMPLES], { traceConfig: [`triton,file=${join(dir, 'trace.json')}`, 'log-frequency=2'] });
  });
  afterAll(async () => {
    await server?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('HTTP: off by default; TIMESTAMPS at rate 1 writes every request to the trace file', async () => {
    expect(await get('/v2/trace/setting')).toEqual({
      trace_file: traceFile(),
      trace_level: ['OFF'],
      trace_rate: '1000',
      trace_count: '-1',
      log_frequency: '2',
      trace_mode: 'triton',
    });
    const updated = await postJson(`${server.url}/v2/trace/setting`, { trace_level: ['TIMESTAMPS'], trace_rate: '1' });
    expect(updated).toMatchObject({ status: 200, json: { trace_level: ['TIMESTAMPS'], trace_rate: '1' } });
    for (const id of ['a', 'b']) {
      expect((await postJson(`${server.url}/v2/models/simple/infer`, { id, ...INFER })).status).toBe(200);
    }
    // log_frequency 2: the second trace writes <trace_file>.0.
    let traces: any[] = [];
    for (let i = 0; i < 50 && traces.length === 0; i++) {
      traces = await readFile(`${traceFile()}.0`, 'utf8').then(JSON.parse, () => []);
      if (traces.length === 0) await new Promise((r) => setTimeout(r, 20));
    }
    expect(traces.map((t) => [t.model_name, t.model_version, t.request_id])).toEqual([
      ['simple', 1, 'a'],
      ['simple', 1, 'b'],
    ]);
    for (const trace of traces) {
      expect(trace.timestamps.map((t: { name: string }) => t.name)).toEqual(ORDER);
      const ns = trace.timestamps.map((t: { ns: number }) => t.ns);
      expect([...ns].sort((x, y) => x - y)).toEqual(ns);
    }
    await postJson(`${server.url}/v2/trace/setting`, { trace_level: ['OFF'] });
  });

  it('HTTP: a model has its own settings until cleared; bad settings get a clear 4xx', async () => {
    expect((await postJson(`${server.url}/v2/models/simple/trace/setting`, { trace_rate: '7' })).json).toMatchObject({ trace_rate: '7' });
    expect(await get('/v2/models/simple/trace/setting')).toMatchObject({ trace_rate: '7' });
    expect(await get('/v2/trace/setting')).toMatchObject({ trace_rate: '1' });
    expect((await postJson(`${server.url}/v2/models/simple/trace/setting`, { trace_rate: null })).json).toMatchObject({ trace_rate: '1' });
    expect(await postJson(`${server.url}/v2/trace/setting`, { trace_file: '/tmp/elsewhere.json' })).toMatchObject({
      status: 400,
      json: { error: expect.stringContaining('trace_file cannot be changed through the API') },
    });
    expect((await postJson(`${server.url}/v2/trace/setting`, { trace_level: ['TENSORS'] })).status).toBe(501);
    expect((await postJson(`${server.url}/v2/trace/setting`, { trace_rate: 'often' })).status).toBe(400);
    expect((await postJson(`${server.url}/v2/models/nope/trace/setting`, { trace_rate: '1' })).status).toBe(400);
    expect((await get('/v2')).extensions).toContain('trace');
  });

  describeWithTritonProtocol('gRPC TraceSetting with the upstream protos', () => {
    let inference: AnyClient;
    beforeAll(() => {
      ({ inference } = upstreamClients(`127.0.0.1:${server.grpcPort}`));
    });
    afterAll(() => inference?.close());

    it('reads and updates global and per-model settings', async () => {
      const global = await unaryCall(inference, 'TraceSetting', { settings: {}, model_name: '' });
      expect(global.settings).toMatchObject({
        trace_level: { value: ['OFF'] },
        trace_file: { value: [traceFile()] },
        log_frequency: { value: ['2'] },
      });
      const model = await unaryCall(inference, 'TraceSetting', { settings: { trace_count: { value: ['5'] } }, model_name: 'simple' });
      expect(model.settings.trace_count).toEqual({ value: ['5'] });
      const cleared = await unaryCall(inference, 'TraceSetting', { settings: { trace_count: { value: [] } }, model_name: 'simple' });
      expect(cleared.settings.trace_count).toEqual({ value: ['-1'] });
      await expect(unaryCall(inference, 'TraceSetting', { settings: { trace_level: { value: ['LOUD'] } } })).rejects.toMatchObject({
        code: status.INVALID_ARGUMENT,
      });
    });
  });
});
