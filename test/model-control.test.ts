import { cp, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { appendFile } from 'node:fs/promises';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { GrpcClient } from '@batchwise/client';
import { identity, serializeModel, simpleAddSub } from '@batchwise/modelgen';
import type { ModelRegistry } from '../packages/server/src/models/model-registry.ts';
import { identityConfig as config, makeRepository } from './support/repository.ts';
import { postJson, startTestServer, getJson } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const infer = (server: Server, model: string) =>
  postJson(`${server.url}/v2/models/${model}/infer`, {
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }],
  });

const index = async (server: Server) => (await postJson(`${server.url}/v2/repository/index`, {})).json as any[];

async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('condition not met in time');
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

const metricsText = async (server: Server) => (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();

async function start(models: Parameters<typeof makeRepository>[0], options: Parameters<typeof startTestServer>[1]) {
  const repo = await makeRepository(models);
  const server = await startTestServer([repo.dir], options);
  cleanups.push(async () => {
    await server.close();
    await repo.remove();
  });
  return { repo, server };
}

describe('explicit model control', () => {
  it('loads only --load-model at start-up, then loads and unloads over HTTP', async () => {
    const { server } = await start(
      [
        { name: 'a', model: identity('FP32', [4]), config: config('a') },
        { name: 'b', model: identity('FP32', [4]), config: config('b') },
      ],
      { modelControlMode: 'explicit', loadModels: ['a'] },
    );
    expect((await fetch(`${server.url}/v2/models/a/ready`)).status).toBe(200);
    expect((await fetch(`${server.url}/v2/models/b/ready`)).status).toBe(400);
    expect((await fetch(`${server.url}/v2/health/ready`)).status).toBe(200);

    expect((await postJson(`${server.url}/v2/repository/models/b/load`, {})).status).toBe(200);
    expect((await infer(server, 'b')).status).toBe(200);

    expect((await postJson(`${server.url}/v2/repository/models/a/unload`, {})).status).toBe(200);
    expect((await fetch(`${server.url}/v2/models/a/ready`)).status).toBe(400);
    expect((await index(server)).find((r) => r.name === 'a')).toMatchObject({ version: '1', state: 'UNAVAILABLE', reason: 'unloaded' });
    expect((await fetch(`${server.url}/v2/health/ready`)).status).toBe(200);
  });

  it('loads with a JSON config override and refuses an unknown model', async () => {
    const { server } = await start([{ name: 'a', model: identity('FP32', [4]), config: config('a') }], {
      modelControlMode: 'explicit',
    });
    const override = JSON.stringify({
      max_batch_size: 2,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [4] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [4] }],
    });
    const loaded = await postJson(`${server.url}/v2/repository/models/a/load`, { parameters: { config: override } });
    expect(loaded.status).toBe(200);
    expect((await getJson(`${server.url}/v2/models/a/config`)).max_batch_size).toBe(2);
    // Protobuf JSON as Triton's clients may write it: lowerCamelCase names, int64 as strings.
    const camel = JSON.stringify({
      maxBatchSize: 3,
      input: [{ name: 'INPUT0', dataType: 'TYPE_FP32', dims: ['4'] }],
      output: [{ name: 'OUTPUT0', dataType: 'TYPE_FP32', dims: ['4'] }],
    });
    expect((await postJson(`${server.url}/v2/repository/models/a/load`, { parameters: { config: camel } })).status).toBe(200);
    const loadedConfig = await getJson(`${server.url}/v2/models/a/config`);
    expect(loadedConfig.max_batch_size).toBe(3);
    expect(loadedConfig.input[0].dims).toEqual([4]);
    const missing = await postJson(`${server.url}/v2/repository/models/nope/load`, {});
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatch(/nope/);
  });

  it('a request that reaches a version after it was unloaded fails at once instead of hanging', async () => {
    const { server } = await start([{ name: 'a', model: identity('FP32', [4]), config: config('a') }], {
      modelControlMode: 'explicit',
      loadModels: ['a'],
    });
    const retired = (server.service as unknown as { models: ModelRegistry }).models.resolve('a');
    expect((await postJson(`${server.url}/v2/repository/models/a/unload`, {})).status).toBe(200);
    const data = new Uint8Array(new Float32Array([1, 2, 3, 4]).buffer);
    const late = retired.scheduler.enqueue({
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data }],
      batchSize: 1,
      priority: 0,
      timeoutMicroseconds: 0,
      arrivalNs: process.hrtime.bigint(),
    });
    await expect(late).rejects.toThrow(/is closed/);
  });

  it('runs model_warmup before a version is ready, and a failing warmup fails the load', async () => {
    const warm = config(
      'warm',
      'model_warmup [ { name: "zeros" batch_size: 2 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]',
    );
    const cold = config(
      'cold',
      'model_warmup [ { name: "wrong" batch_size: 1 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 5 ] zero_data: true } } } ]',
    );
    const { server } = await start(
      [
        { name: 'warm', model: identity('FP32', [4]), config: warm },
        { name: 'cold', model: identity('FP32', [4]), config: cold },
      ],
      { modelControlMode: 'explicit', loadModels: ['*'] },
    );
    expect((await fetch(`${server.url}/v2/models/warm/ready`)).status).toBe(200);
    const row = (await index(server)).find((r) => r.name === 'cold');
    expect(row.state).toBe('UNAVAILABLE');
    expect(row.reason).toMatch(/warmup sample 'wrong'/);
  });
});

describe('repository index and refusals as Triton gives them', () => {
  it('lists every model of the repository, name only for never-loaded ones, over HTTP and gRPC', async () => {
    const { server } = await start(
      [
        { name: 'a', model: identity('FP32', [4]), config: config('a') },
        { name: 'b', model: identity('FP32', [4]), config: config('b') },
      ],
      { modelControlMode: 'explicit', loadModels: ['a'] },
    );
    const grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
    cleanups.push(() => grpc.close());
    const a = { name: 'a', version: '1', state: 'READY', reason: '' };
    expect(await index(server)).toEqual([a, { name: 'b' }]);
    expect((await postJson(`${server.url}/v2/repository/index`, { ready: true })).json).toEqual([a]);
    expect(await grpc.repositoryIndex()).toEqual([a, { name: 'b', version: '', state: '', reason: '' }]);
    expect(await grpc.repositoryIndex({ ready: true })).toEqual([a]);

    // After an unload the entry keeps its version, as Triton's does (core ModelLifeCycle: UNAVAILABLE, "unloaded").
    expect((await postJson(`${server.url}/v2/repository/models/a/unload`, {})).status).toBe(200);
    const unloaded = { name: 'a', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' };
    expect(await index(server)).toEqual([unloaded, { name: 'b' }]);
    expect(await grpc.repositoryIndex()).toEqual([unloaded, { name: 'b', version: '', state: '', reason: '' }]);
    expect((await postJson(`${server.url}/v2/repository/index`, { ready: true })).json).toEqual([]);
    expect(await grpc.repositoryIndex({ ready: true })).toEqual([]);
    // Loaded again, it is READY again, with no row left of the unload.
    await grpc.loadModel('a');
    expect(await index(server)).toEqual([a, { name: 'b' }]);
  });

  it('keeps a row for every version that served after an unload', async () => {
    const { repo, server } = await start(
      [{ name: 'v', model: identity('FP32', [4]), config: config('v', 'version_policy: { all { } }') }],
      {
        modelControlMode: 'explicit',
        loadModels: ['v'],
      },
    );
    await mkdir(join(repo.dir, 'v', '2'));
    await writeFile(join(repo.dir, 'v', '2', 'model.onnx'), serializeModel(identity('FP32', [4])));
    expect((await postJson(`${server.url}/v2/repository/models/v/load`, {})).status).toBe(200);
    expect((await index(server)).map((r) => `${r.version} ${r.state}`)).toEqual(['1 READY', '2 READY']);
    expect((await postJson(`${server.url}/v2/repository/models/v/unload`, {})).status).toBe(200);
    expect(await index(server)).toEqual([
      { name: 'v', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' },
      { name: 'v', version: '2', state: 'UNAVAILABLE', reason: 'unloaded' },
    ]);
  });

  it("a version a reload retires keeps its row, as Triton's: UNLOADING while its request drains, then UNAVAILABLE unloaded", async () => {
    // A JavaScript identity whose execute() takes 1.5 s: a request on version 1 is still running when version 2 replaces it.
    const slow = `import { tensor } from '@batchwise/backend';
export default {
  async execute(requests) {
    await new Promise((resolve) => setTimeout(resolve, 1500));
    return requests.map((r) => ({ outputs: [tensor('OUTPUT0', 'FP32', r.inputs.INPUT0.shape, r.inputs.INPUT0.data)] }));
  },
};
`;
    const { repo, server } = await start([{ name: 'r', config: config('r', 'backend: "js"'), files: { '1/model.mjs': slow } }], {
      modelControlMode: 'explicit',
      loadModels: ['r'],
    });
    const running = infer(server, 'r');
    await new Promise((resolve) => setTimeout(resolve, 300));
    await mkdir(join(repo.dir, 'r', '2'));
    await writeFile(join(repo.dir, 'r', '2', 'model.mjs'), slow);
    expect((await postJson(`${server.url}/v2/repository/models/r/load`, {})).status).toBe(200);
    expect(await index(server)).toEqual([
      { name: 'r', version: '1', state: 'UNLOADING', reason: '' },
      { name: 'r', version: '2', state: 'READY', reason: '' },
    ]);
    expect((await running).status).toBe(200);
    await waitFor(async () => (await index(server))[0].state === 'UNAVAILABLE');
    expect(await index(server)).toEqual([
      { name: 'r', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' },
      { name: 'r', version: '2', state: 'READY', reason: '' },
    ]);
    // Unloaded whole: both rows say so; version 1 kept its own.
    expect((await postJson(`${server.url}/v2/repository/models/r/unload`, {})).status).toBe(200);
    await waitFor(async () => (await index(server)).every((row) => row.state === 'UNAVAILABLE'));
    expect(await index(server)).toEqual([
      { name: 'r', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' },
      { name: 'r', version: '2', state: 'UNAVAILABLE', reason: 'unloaded' },
    ]);
  });

  it('accepts unload_dependents on any model over HTTP and gRPC, as Triton does; gRPC refuses a value that is not a bool_param', async () => {
    const { server } = await start(
      [
        { name: 'a', model: identity('FP32', [4]), config: config('a') },
        { name: 'b', model: identity('FP32', [4]), config: config('b') },
      ],
      { modelControlMode: 'explicit', loadModels: ['a', 'b'] },
    );
    const grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
    cleanups.push(() => grpc.close());
    // A model that is not an ensemble has no dependents: only the model itself goes.
    expect((await postJson(`${server.url}/v2/repository/models/a/unload`, { parameters: { unload_dependents: true } })).status).toBe(200);
    expect(await index(server)).toEqual([
      { name: 'a', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' },
      { name: 'b', version: '1', state: 'READY', reason: '' },
    ]);
    const raw = (grpc as unknown as { client: Record<string, Function> }).client;
    const unload = (parameters: unknown) =>
      new Promise<unknown>((resolve, reject) =>
        raw['RepositoryModelUnload']!.call(raw, { model_name: 'b', parameters }, (e: unknown, r: unknown) => (e ? reject(e) : resolve(r))),
      );
    await expect(unload({ unload_dependents: { string_param: 'true' } })).rejects.toMatchObject({
      code: 3, // INVALID_ARGUMENT
      details: "invalid value type for 'unload_dependents' parameter, expected bool_param.",
    });
    expect(await grpc.isModelReady('b')).toBe(true);
    await grpc.unloadModel('b', { unloadDependents: true });
    expect(await grpc.isModelReady('b')).toBe(false);
    expect((await fetch(`${server.url}/v2/health/ready`)).status).toBe(200);
  });

  it('refuses load and unload in model control mode NONE with the words Triton uses', async () => {
    const { server } = await start([{ name: 'a', model: identity('FP32', [4]), config: config('a') }], { modelControlMode: 'none' });
    for (const action of ['load', 'unload']) {
      const { status, json } = await postJson(`${server.url}/v2/repository/models/a/${action}`, {});
      expect(status).toBe(503);
      expect(json.error).toBe('explicit model load / unload is not allowed if polling is enabled');
    }
  });

  it("fails a model found in two repositories alone, with Triton's reason, and loads the rest", async () => {
    const first = await makeRepository([
      { name: 'a', model: identity('FP32', [4]), config: config('a') },
      { name: 'd', model: identity('FP32', [4]), config: config('d') },
    ]);
    const second = await makeRepository([{ name: 'd', model: identity('FP32', [4]), config: config('d') }]);
    const server = await startTestServer([first.dir, second.dir], { modelControlMode: 'none' });
    cleanups.push(async () => {
      await server.close();
      await first.remove();
      await second.remove();
    });
    expect((await infer(server, 'a')).status).toBe(200);
    expect(await index(server)).toEqual([
      { name: 'a', version: '1', state: 'READY', reason: '' },
      { name: 'd', state: 'UNAVAILABLE', reason: 'model appears in two or more repositories' },
    ]);
    expect((await infer(server, 'd')).status).not.toBe(200);
  });
});

describe('poll mode', () => {
  it("refuses explicit load and unload with Triton's message", async () => {
    const { server } = await start([{ name: 'a', model: identity('FP32', [4]), config: config('a') }], {
      modelControlMode: 'poll',
      repositoryPollSecs: 1,
    });
    const { status, json } = await postJson(`${server.url}/v2/repository/models/a/load`, {});
    expect(status).toBe(503);
    expect(json.error).toBe('explicit model load / unload is not allowed if polling is enabled');
  });

  it('switches to a new version without failing a request, and keeps serving when a bad version arrives', async () => {
    const { repo, server } = await start([{ name: 'm', model: identity('FP32', [4]), config: config('m') }], {
      modelControlMode: 'poll',
      repositoryPollSecs: 1,
    });
    let stop = false;
    const failures: string[] = [];
    let served = 0;
    const load = (async () => {
      while (!stop) {
        const r = await infer(server, 'm');
        if (r.status !== 200) failures.push(JSON.stringify(r.json));
        served++;
      }
    })();

    await mkdir(join(repo.dir, 'm', '2'));
    await writeFile(join(repo.dir, 'm', '2', 'model.onnx'), serializeModel(identity('FP32', [4])));
    await waitFor(async () => (await infer(server, 'm')).json?.model_version === '2');

    // A corrupt version 3: version 2 must keep serving, the failure must be visible.
    await mkdir(join(repo.dir, 'm', '3'));
    await writeFile(join(repo.dir, 'm', '3', 'model.onnx'), Buffer.from('not an onnx model'));
    await waitFor(async () => (await index(server)).some((r) => r.version === '3' && r.state === 'UNAVAILABLE'));
    expect((await infer(server, 'm')).json.model_version).toBe('2');
    const metrics = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/batchwise_model_load_failures_total\{model="m",version="3"\} [1-9]/);

    // The fix arrives: polling carries on and picks it up.
    await rm(join(repo.dir, 'm', '3'), { recursive: true });
    await mkdir(join(repo.dir, 'm', '4'));
    await cp(join(repo.dir, 'm', '2', 'model.onnx'), join(repo.dir, 'm', '4', 'model.onnx'));
    await waitFor(async () => (await infer(server, 'm')).json?.model_version === '4');

    stop = true;
    await load;
    expect(failures).toEqual([]);
    expect(served).toBeGreaterThan(10);
  });

  it('logs a broken config that stays as it is once, not at every poll; each change of it once (issue 35)', async () => {
    const lines: { msg: string; model?: string }[] = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string }) });
    const broken = (value: string) => `name: "b"\nmax_batch_size: ${value}\n`;
    const { repo, server } = await start(
      [
        { name: 'm', model: identity('FP32', [4]), config: config('m') },
        { name: 'b', model: identity('FP32', [4]), config: broken('eight') },
      ],
      { modelControlMode: 'poll', repositoryPollSecs: 1, logger },
    );
    const logged = (msg: string) => lines.filter((l) => l.model === 'b' && l.msg === msg).length;
    const errors = () => logged('model failed to load');
    // Every look at the model logs its failure, as an error or (unchanged) at debug: the test's clock, in polls.
    const looks = () => errors() + logged('model still fails to load, for the same reason');
    const write = (text: string) => writeFile(join(repo.dir, 'b', 'config.pbtxt'), text);

    await waitFor(async () => looks() >= 3, 15_000);
    expect(errors()).toBe(1);
    // Another mistake is a change of state: said once, then quiet again.
    await write(broken('nine'));
    await waitFor(async () => errors() === 2, 15_000);
    const before = looks();
    await waitFor(async () => looks() >= before + 2, 15_000);
    expect(errors()).toBe(2);
    // Fixed, then broken again as at first: that is news again.
    await write(config('b'));
    await waitFor(async () => (await infer(server, 'b')).status === 200, 15_000);
    await write(broken('eight'));
    await waitFor(async () => errors() === 3, 15_000);
    const after = looks();
    await waitFor(async () => looks() >= after + 2, 15_000);
    expect(errors()).toBe(3);
  });

  it('keeps batchwise_model_ready at 1 for a version reloaded in place after a config change', async () => {
    const { repo, server } = await start([{ name: 'm', model: identity('FP32', [4]), config: config('m') }], {
      modelControlMode: 'poll',
      repositoryPollSecs: 1,
    });
    const ready = /^batchwise_model_ready\{[^}]*model="m"[^}]*version="1"[^}]*\} (\d)$/m;
    expect(ready.exec(await metricsText(server))?.[1]).toBe('1');
    await appendFile(join(repo.dir, 'm', 'config.pbtxt'), 'dynamic_batching { }\n');
    await waitFor(async () => (await getJson(`${server.url}/v2/models/m/config`)).dynamic_batching !== undefined);
    expect(ready.exec(await metricsText(server))?.[1]).toBe('1');
  });

  it('polls on while a retired version drains a slow request: other models switch meanwhile', async () => {
    // One request waits in slow's queue for 8 s (a preferred batch of 8 that never fills).
    const slowConfig = config(
      'slow',
      'dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 8000000 }\n' +
        'parameters { key: "batchwise_adaptive_queue_delay" value: { string_value: "false" } }',
    );
    const { repo, server } = await start(
      [
        { name: 'slow', model: identity('FP32', [4]), config: slowConfig },
        { name: 'fast', model: identity('FP32', [4]), config: config('fast') },
      ],
      { modelControlMode: 'poll', repositoryPollSecs: 1 },
    );
    let slowDone = false;
    const slow = infer(server, 'slow').finally(() => (slowDone = true));
    const pending = /^nv_inference_pending_request_count\{[^}]*model="slow"[^}]*\} 1$/m;
    await waitFor(async () => pending.test(await metricsText(server)));

    for (const name of ['slow', 'fast']) {
      await mkdir(join(repo.dir, name, '2'));
      await writeFile(join(repo.dir, name, '2', 'model.onnx'), serializeModel(identity('FP32', [4])));
    }
    await waitFor(async () => (await infer(server, 'fast')).json?.model_version === '2');
    expect(slowDone).toBe(false);
    const answered = await slow;
    expect(answered.status).toBe(200);
    expect(answered.json.model_version).toBe('1');
  });
});

describe('load with file overrides, as Triton implements them', () => {
  const simpleConfig = JSON.stringify({
    name: 'simple',
    max_batch_size: 8,
    input: [
      { name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] },
      { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [16] },
    ],
    output: [
      { name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [16] },
      { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [16] },
    ],
  });
  const simpleBytes = serializeModel(simpleAddSub());
  const row = Array.from({ length: 16 }, (_, i) => i);
  const inferSimple = (server: Server, model: string) =>
    postJson(`${server.url}/v2/models/${model}/infer`, {
      inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], data: row })),
    });
  const overrideFolders = async () => (await readdir(tmpdir())).filter((n) => n.startsWith('batchwise-override-')).sort();

  it("loads a generated model sent as files over HTTP (base64) and gRPC (bytes), in place of the repository's files", async () => {
    const { server } = await start([{ name: 'a', model: identity('FP32', [4]), config: config('a') }], {
      modelControlMode: 'explicit',
      loadModels: ['a'],
    });
    const grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
    cleanups.push(() => grpc.close());
    const before = await overrideFolders();

    // A model the repository does not have, over HTTP with Triton's JSON: config plus base64 files.
    const parameters = {
      config: simpleConfig.replace('"simple"', '"fresh"'),
      'file:1/model.onnx': Buffer.from(simpleBytes).toString('base64'),
    };
    expect((await postJson(`${server.url}/v2/repository/models/fresh/load`, { parameters })).status).toBe(200);
    const fresh = await inferSimple(server, 'fresh');
    expect(fresh.status).toBe(200);
    expect(fresh.json.outputs.find((o: any) => o.name === 'OUTPUT0').data).toEqual(row.map((x) => 2 * x));
    expect((await index(server)).find((r) => r.name === 'fresh')).toEqual({ name: 'fresh', version: '1', state: 'READY', reason: '' });

    // Over gRPC, bytes_param: model 'a' now serves the override (two INT32 inputs), not its repository identity.
    await grpc.loadModel('a', { config: simpleConfig.replace('"simple"', '"a"'), files: { '2/model.onnx': simpleBytes } });
    const a = await inferSimple(server, 'a');
    expect(a.status).toBe(200);
    expect(a.json.model_version).toBe('2');
    expect(a.json.outputs.find((o: any) => o.name === 'OUTPUT1').data).toEqual(row.map(() => 0));
    expect((await infer(server, 'a')).status).toBe(400);

    // A load without overrides undoes them: the repository's files serve again.
    expect((await postJson(`${server.url}/v2/repository/models/a/load`, {})).status).toBe(200);
    expect((await infer(server, 'a')).status).toBe(200);
    // Override folders go once no version loaded from them serves.
    expect((await postJson(`${server.url}/v2/repository/models/fresh/unload`, {})).status).toBe(200);
    await waitFor(async () => JSON.stringify(await overrideFolders()) === JSON.stringify(before));
  });

  it('refuses what Triton refuses, alike over HTTP and gRPC, with its words, and loads nothing', async () => {
    const { server } = await start([{ name: 'a', model: identity('FP32', [4]), config: config('a') }], {
      modelControlMode: 'explicit',
      modelLoadFilesMaxBytes: simpleBytes.byteLength + 10,
    });
    const grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}` });
    cleanups.push(() => grpc.close());
    const raw = grpc as unknown as { call(method: string, request: unknown): Promise<unknown> };
    const grpcLoad = (parameters: Record<string, unknown>) =>
      raw.call('RepositoryModelLoad', { repository_name: '', model_name: 'b', parameters }).then(
        () => ({ code: 0, message: '' }),
        (error: { message: string; grpcCode: number }) => ({ code: error.grpcCode, message: error.message }),
      );
    const httpLoad = async (parameters: Record<string, unknown>) => {
      const { status, json } = await postJson(`${server.url}/v2/repository/models/b/load`, { parameters });
      return { status, message: json?.error as string };
    };
    const model = Buffer.from(simpleBytes);
    const cases: [string, Record<string, unknown>, Record<string, unknown>, string | RegExp][] = [
      [
        'a file without the config',
        { 'file:1/model.onnx': model.toString('base64') },
        { 'file:1/model.onnx': { bytes_param: model } },
        "Load parameter 'config' must be specified for model file override",
      ],
      [
        'a path that leaves the model folder',
        { config: simpleConfig, 'file:../escape/model.onnx': model.toString('base64') },
        { config: { string_param: simpleConfig }, 'file:../escape/model.onnx': { bytes_param: model } },
        "Invalid file parameter 'file:../escape/model.onnx' with normalized path '../escape/model.onnx' must stay within model directory.",
      ],
      [
        'files over the size limit',
        { config: simpleConfig, 'file:1/model.onnx': model.toString('base64'), 'file:1/extra.bin': Buffer.alloc(64).toString('base64') },
        {
          config: { string_param: simpleConfig },
          'file:1/model.onnx': { bytes_param: model },
          'file:1/extra.bin': { bytes_param: Buffer.alloc(64) },
        },
        `'file:1/extra.bin' exceeds the maximum allowed data size limit of ${model.length + 10} bytes (--model-load-files-max-bytes): the file overrides of this load request take ${model.length + 64} bytes or more`,
      ],
      [
        'an unknown parameter',
        { config: simpleConfig, colour: 'blue' },
        { config: { string_param: simpleConfig }, colour: { string_param: 'blue' } },
        "Unrecognized load parameter 'colour' with type 'STRING'",
      ],
      [
        'a config that is not a string',
        { config: true },
        { config: { bool_param: true } },
        "Config parameter 'config' must have string type for its value",
      ],
    ];
    for (const [what, http, rpc, message] of cases) {
      const h = await httpLoad(http);
      expect(h.status, what).toBe(400);
      expect(h.message, what).toMatch(message);
      const g = await grpcLoad(rpc);
      expect(g.code, what).toBe(3); // INVALID_ARGUMENT
      expect(g.message, what).toContain(typeof message === 'string' ? message : '');
    }
    // Each protocol's own form of a file: bytes over gRPC, base64 text over HTTP.
    expect((await grpcLoad({ config: { string_param: simpleConfig }, 'file:1/model.onnx': { string_param: 'abc' } })).message).toContain(
      "File parameter 'file:1/model.onnx' must have bytes type for its value",
    );
    expect((await httpLoad({ config: simpleConfig, 'file:1/model.onnx': 'not base64!' })).message).toBe(
      "load parameter 'file:1/model.onnx' must be base64 text (the file's bytes)",
    );
    // A file in a folder a file already took.
    const clash = await httpLoad({
      config: simpleConfig.replace('"simple"', '"b"'),
      'file:1': 'AAAA',
      'file:1/model.onnx': model.toString('base64'),
    });
    expect(clash.status).toBe(400);
    expect(clash.message).toMatch(/Invalid file parameter 'file:1(\/model.onnx)?', directory has been created as a file/);
    expect((await fetch(`${server.url}/v2/models/b/ready`)).status).toBe(400);
    expect(await index(server)).not.toContainEqual(expect.objectContaining({ name: 'b', state: 'READY' }));
  });
});
