/**
 * Many models per host (issue 27), on real servers: `--load-on-demand` with `--model-memory-limit`
 * on the compiled CLI, its repository in s3rver with `--model-cache-disk-limit`; answers compared
 * with the same models run in-process by ONNX Runtime. One server serves every case but the memory
 * measurement, which has a server of its own (a process that did nothing else).
 */
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpClient } from '@batchwise/client';
import { mlp, serializeModel } from '@batchwise/modelgen';
import { loadOrt } from '@batchwise/modelgen/test-support/ort.ts';
import { startServerProcess, type ServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { postJson } from './support/server.ts';
import { makeRepository } from './support/repository.ts';
import { INSTANCE_WORKER_BYTES } from '../packages/server/src/memory/model-footprint.ts';
import { startTestS3, waitFor, type TestS3 } from './support/s3.ts';

const WIDTH = 256;
/** An MLP's config; its instances stay in their worker threads (none moves to the event loop), so each holds a worker's share. */
const mlpConfig = (name: string, width = WIDTH, extra = '', instances = 1) => `name: "${name}"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${width} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${width} ] } ]
instance_group [ { kind: KIND_CPU count: ${instances} } ]
parameters { key: "batchwise_event_loop_run_us" value: { string_value: "0" } }
${extra}`;

/** The models of the repository: MLPs of 2x256 (about 527 KB of weights each), each of its own seed. */
const MODELS = ['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'pinned', 'slow', 'e_step'];
const seedOf = (name: string) => MODELS.indexOf(name) + 1;
const bytesOf = (name: string) => serializeModel(mlp({ layers: 2, width: WIDTH, seed: seedOf(name) }));
const WEIGHTS = bytesOf('m0').length;
/**
 * Room for three of them (`pinned` and two loaded for requests), each its weights and its instance's
 * worker thread, and for the worker of the ensemble's JavaScript step (no weights).
 */
const MEMORY_LIMIT = 3 * (WEIGHTS + INSTANCE_WORKER_BYTES) + INSTANCE_WORKER_BYTES + 1000;
/** Room on disk for four of them. */
const DISK_LIMIT = 4 * WEIGHTS + 1000;

/** A JavaScript step that holds each batch 800 ms and passes its input on. */
const DELAY_JS = `export default {
  async execute(requests) {
    await new Promise((resolve) => setTimeout(resolve, 800));
    return requests.map((request) => ({ outputs: [{ ...request.inputs.INPUT0, name: 'OUTPUT0' }] }));
  },
};
`;

const FILES: Record<string, string | Uint8Array> = {
  ...Object.fromEntries(
    MODELS.flatMap((name) => [
      [`${name}/config.pbtxt`, mlpConfig(name)],
      [`${name}/1/model.onnx`, bytesOf(name)],
    ]),
  ),
  // A request waits in its queue 1.5 s (a batch of 8 preferred, the delay always spent): in flight meanwhile.
  'slow/config.pbtxt': mlpConfig(
    'slow',
    WIDTH,
    `dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 1500000 }
parameters { key: "batchwise_adaptive_queue_delay" value: { string_value: "false" } }`,
  ),
  // Five instances of 8 MB of weights: more than the whole limit.
  'big/config.pbtxt': mlpConfig('big', 1024, '', 5),
  'big/1/model.onnx': serializeModel(mlp({ layers: 2, width: 1024, seed: 99 })),
  'corrupt/config.pbtxt': mlpConfig('corrupt'),
  'corrupt/1/model.onnx': 'not an ONNX model',
  'delay/config.pbtxt': `name: "delay"
backend: "js"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]`,
  'delay/1/model.mjs': DELAY_JS,
  'ens/1/.gitkeep': '',
  'ens/config.pbtxt': `name: "ens"
platform: "ensemble"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]
ensemble_scheduling { step [
  { model_name: "delay" model_version: -1 input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "mid" } },
  { model_name: "e_step" model_version: -1 input_map { key: "INPUT0" value: "mid" } output_map { key: "OUTPUT0" value: "OUTPUT0" } }
] }`,
};

const input = (seed: number) => Float32Array.from({ length: WIDTH }, (_, i) => Math.sin(seed * 31 + i) * 2);

/** What ONNX Runtime in this process answers for the model, on one row. */
async function expected(name: string, row: Float32Array): Promise<Float32Array> {
  const ort = loadOrt();
  const session = await ort.InferenceSession.create(bytesOf(name));
  try {
    const out = await session.run({ INPUT0: new ort.Tensor('float32', row, [1, WIDTH]) });
    return Float32Array.from(out['OUTPUT0']!.data as Float32Array);
  } finally {
    await session.release();
  }
}

async function metric(server: ServerProcess, series: string): Promise<number> {
  const text = await (await fetch(server.metricsUrl)).text();
  const escaped = series.replace(/[{}"=]/g, (c) => `\\${c}`);
  const match = new RegExp(`^${escaped} (\\S+)$`, 'm').exec(text);
  return match ? Number(match[1]) : 0;
}

/** Log lines of the server with this message (and model). */
const logsOf = (server: ServerProcess, msg: string, model?: string) =>
  server.logs.filter((l) => l['msg'] === msg && (model === undefined || l['model'] === model));

describe('many models per host: --load-on-demand, --model-memory-limit, --model-cache-disk-limit (s3rver)', () => {
  let dir: string;
  let s3: TestS3;
  let server: ServerProcess;
  let client: HttpClient;
  const infer = (model: string, seed = 1, parameters?: Record<string, number | string | boolean>) =>
    client.infer({
      model,
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, WIDTH], data: input(seed) }],
      binary: true,
      ...(parameters && { parameters }),
    });
  const inferStatus = (model: string, parameters?: Record<string, unknown>) =>
    postJson(`${server.httpUrl}/v2/models/${model}/infer`, {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, WIDTH], data: [...input(1)] }],
      ...(parameters && { parameters }),
    });
  const index = async () =>
    (await postJson(`${server.httpUrl}/v2/repository/index`, {})).json as { name: string; state?: string; reason?: string }[];
  const rowOf = async (name: string) => (await index()).find((r) => r.name === name);
  const cacheDir = () => join(dir, 'tmp', 'batchwise-cache');

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batchwise-many-models-'));
    s3 = await startTestS3(join(dir, 's3'));
    for (const [key, body] of Object.entries(FILES)) await s3.put(`repo/${key}`, body);
    await mkdir(join(dir, 'tmp'));
    server = await startServerProcess(
      [
        '--model-repository',
        s3.location('repo'),
        '--model-control-mode',
        'explicit',
        '--load-model',
        'pinned',
        '--load-on-demand',
        '--load-on-demand-retry-secs',
        '1',
        '--model-memory-limit',
        String(MEMORY_LIMIT),
        '--model-cache-disk-limit',
        String(DISK_LIMIT),
      ],
      // The SDK's default provider chain finds these; the cache goes under the test's folder.
      { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', TMPDIR: join(dir, 'tmp') },
    );
    client = new HttpClient({ url: server.httpUrl, connections: 16 });
  });
  afterAll(async () => {
    await client?.close();
    await server?.stop();
    await s3?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('lists the models not loaded with the reason, and is ready without them', async () => {
    expect((await fetch(`${server.httpUrl}/v2/health/ready`)).status).toBe(200);
    expect(await rowOf('m0')).toEqual({
      name: 'm0',
      state: 'UNAVAILABLE',
      reason: 'not loaded: loads on its first request (--load-on-demand)',
    });
    expect(await rowOf('pinned')).toMatchObject({ state: 'READY' });
  });

  it('loads a model once for 16 concurrent first requests, which all get its answer', async () => {
    const loadsBefore = await metric(server, 'batchwise_model_loads_total');
    const answers = await Promise.all(Array.from({ length: 16 }, () => infer('m0')));
    const want = await expected('m0', input(1));
    for (const answer of answers) expect(answer.outputs[0]!.data).toEqual(want);
    expect(await metric(server, 'batchwise_model_loads_total')).toBe(loadsBefore + 1);
    expect(logsOf(server, 'model version ready', 'm0')).toHaveLength(1);
    expect(await metric(server, 'batchwise_model_load_wait_seconds_count')).toBeGreaterThanOrEqual(16);
  });

  it('answers as ONNX Runtime does before and after an eviction and reload, without downloading the model again', async () => {
    const want = await expected('m0', input(7));
    expect((await infer('m0', 7)).outputs[0]!.data).toEqual(want);
    // Two more models loaded for requests: m0, the least recently used, makes room.
    expect((await infer('m1', 7)).outputs[0]!.data).toEqual(await expected('m1', input(7)));
    expect((await infer('m2', 7)).outputs[0]!.data).toEqual(await expected('m2', input(7)));
    expect((await rowOf('m0'))?.reason).toMatch(
      /^evicted at \S+ to make room for 'm2' \(--model-memory-limit\); loads again on its next request$/,
    );
    expect(await metric(server, 'batchwise_model_evictions_total')).toBeGreaterThanOrEqual(1);
    expect((await infer('m0', 7)).outputs[0]!.data).toEqual(want);
    expect(logsOf(server, 'model version ready', 'm0')).toHaveLength(2);
    // The local cache kept m0's version: its reload read it from disk.
    const versionDownloads = logsOf(server, 'downloading model from S3', 'm0').filter(
      (l) => 'cacheDir' in l && (l['versions'] as number[]).length > 0,
    );
    expect(versionDownloads).toHaveLength(1);
  });

  it('waits no longer than the request timeout for a load', async () => {
    const { status, json } = await inferStatus('m3', { timeout: 1000 });
    expect(status).toBe(503);
    expect(json.error).toMatch(/model 'm3' did not load within 0.001 s/);
    // The load goes on for the next request.
    await waitFor(async () => (await rowOf('m3'))?.state === 'READY', 30_000);
  });

  it('evicts under load from 8 clients without failing a request', async () => {
    const evictionsBefore = await metric(server, 'batchwise_model_evictions_total');
    const names = ['m0', 'm1', 'm2', 'm3', 'm4'];
    const failures: string[] = [];
    let answered = 0;
    const until = Date.now() + 4000;
    await Promise.all(
      Array.from({ length: 8 }, async (_, c) => {
        for (let i = 0; Date.now() < until; i++) {
          const name = names[(c * 3 + i * (c + 1)) % names.length]!;
          await infer(name, c).then(
            () => answered++,
            (error: Error) => failures.push(`${name}: ${error.message}`),
          );
        }
      }),
    );
    expect(failures).toEqual([]);
    expect(answered).toBeGreaterThan(8);
    expect(await metric(server, 'batchwise_model_evictions_total')).toBeGreaterThan(evictionsBefore);
    expect(await metric(server, 'batchwise_model_memory_bytes')).toBeLessThanOrEqual(MEMORY_LIMIT);
  });

  it('never evicts a model with a request in flight', async () => {
    await infer('m0');
    let answered = false;
    const pending = infer('slow').finally(() => (answered = true)); // waits 1.5 s in the queue of slow
    await waitFor(async () => (await rowOf('slow'))?.state === 'READY', 30_000);
    // slow is the least recently used by the time these load, and stays: each evicts another.
    await infer('m1');
    await infer('m2');
    expect(answered, 'the loads of m1 and m2 ended before the request to slow was answered').toBe(false);
    expect((await pending).outputs[0]!.data).toEqual(await expected('slow', input(1)));
    expect(logsOf(server, 'model evicted: the least recently used, to make room', 'slow')).toEqual([]);
  });

  it("never evicts the steps of an ensemble in use, and loads an ensemble's steps with it", async () => {
    expect((await infer('ens', 3)).outputs[0]!.data).toEqual(await expected('e_step', input(3)));
    const pending = infer('ens', 4); // 800 ms in its first step
    await new Promise((resolve) => setTimeout(resolve, 100));
    const since = Date.now();
    await infer('m3');
    await infer('m4');
    expect((await pending).outputs[0]!.data).toEqual(await expected('e_step', input(4)));
    const end = Date.now();
    const evicted = logsOf(server, 'model evicted: the least recently used, to make room', 'e_step').map((l) => l['time'] as number);
    expect(evicted.filter((time) => time >= since && time <= end)).toEqual([]);
    // Once the ensemble is idle, its step is evicted like any other model.
    await infer('m0');
    await infer('m1');
    expect((await rowOf('e_step'))?.reason).toMatch(/^evicted at/);
  });

  it('fails a model larger than the limit, naming both sizes', async () => {
    const { status, json } = await inferStatus('big');
    expect(status).toBe(404);
    expect(json.error).toMatch(
      new RegExp(
        `model 'big' version 1 needs about \\d+ bytes of host memory \\(\\d+ bytes of weights x 5 CPU instances, and 5 worker threads of ${INSTANCE_WORKER_BYTES} bytes\\), more than the ${MEMORY_LIMIT} bytes of --model-memory-limit`,
      ),
    );
  });

  it("answers a corrupt model's requests with its load error at once, and tries again only after the back-off", async () => {
    const failures = () => metric(server, 'batchwise_model_load_failures_total{model="corrupt",version="1"}');
    const first = await inferStatus('corrupt');
    expect(first.status).toBe(404);
    expect(first.json.error).toMatch(/corrupt/);
    expect(await failures()).toBe(1);
    const started = Date.now();
    const again = await Promise.all(Array.from({ length: 4 }, () => inferStatus('corrupt')));
    expect(Date.now() - started).toBeLessThan(500);
    for (const answer of again) expect(answer.json.error).toMatch(/load failed at \S+; the first request after \S+ tries again/);
    expect(await failures()).toBe(1);
    expect((await rowOf('corrupt'))?.reason).toMatch(/load failed at \S+; the first request after \S+ tries again/);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await inferStatus('corrupt')).status).toBe(404);
    expect(await failures()).toBe(2);
  });

  it('keeps a model pinned by a load request until it is unloaded', async () => {
    expect((await postJson(`${server.httpUrl}/v2/repository/models/m5/load`, {})).status).toBe(200);
    for (const name of ['m0', 'm1', 'm2', 'm0']) await infer(name);
    expect(await rowOf('m5')).toMatchObject({ state: 'READY' });
    expect(await rowOf('pinned')).toMatchObject({ state: 'READY' });
    expect(logsOf(server, 'model evicted: the least recently used, to make room', 'm5')).toEqual([]);
    expect(logsOf(server, 'model evicted: the least recently used, to make room', 'pinned')).toEqual([]);
    expect((await postJson(`${server.httpUrl}/v2/repository/models/m5/unload`, {})).status).toBe(200);
    await infer('m5');
    await infer('m1');
    await infer('m2');
    expect((await rowOf('m5'))?.reason).toMatch(/^evicted at/);
  });

  it('keeps the local cache within its disk limit, deleting the least recently used versions', async () => {
    const cached = async () => {
      let total = 0;
      for (const cache of await readdir(cacheDir())) {
        for (const model of await readdir(join(cacheDir(), cache))) {
          for (const version of await readdir(join(cacheDir(), cache, model)).catch(() => [])) {
            if (!/^\d+$/.test(version)) continue;
            total += (await stat(join(cacheDir(), cache, model, version, 'model.onnx')).catch(() => ({ size: 0 }))).size;
          }
        }
      }
      return total;
    };
    await waitFor(async () => (await cached()) <= DISK_LIMIT, 10_000);
    expect(await metric(server, 'batchwise_model_cache_bytes')).toBeLessThanOrEqual(DISK_LIMIT);
    expect(await metric(server, 'batchwise_model_cache_limit_bytes')).toBe(DISK_LIMIT);
    // big (8 MB) and the versions least recently used went.
    expect(await metric(server, 'batchwise_model_cache_deletions_total')).toBeGreaterThan(0);
  });
});

describe('memory under --model-memory-limit (a process of its own)', () => {
  const width = 768;
  const names = Array.from({ length: 8 }, (_, i) => `w${i}`);
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let server: ServerProcess;
  let client: HttpClient;
  const weights = serializeModel(mlp({ layers: 2, width, seed: 1 })).length;
  /** Room for three: their weights and their instances' workers. */
  const limit = 3 * (weights + INSTANCE_WORKER_BYTES) + 1000;
  const rss = async (field: 'VmRSS' | 'VmHWM') => {
    const status = await readFile(`/proc/${server.child.pid}/status`, 'utf8');
    return Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
  };
  const infer = (name: string) =>
    client.infer({
      model: name,
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, width], data: new Float32Array(width).fill(0.5) }],
      binary: true,
    });

  beforeAll(async () => {
    repo = await makeRepository(
      names.map((name, i) => ({ name, model: mlp({ layers: 2, width, seed: i + 1 }), config: mlpConfig(name, width) })),
    );
    server = await startServerProcess(['--model-repository', repo.dir, '--load-on-demand', '--model-memory-limit', String(limit)]);
    client = new HttpClient({ url: server.httpUrl });
  });
  afterAll(async () => {
    await client?.close();
    await server?.stop();
    await repo?.remove();
  });

  it('stays within the limit plus the runtime’s own share while 8 models take turns in room for 3', async () => {
    const rest = await rss('VmRSS');
    // The runtime's share, measured: what the first model adds beyond its weights (ONNX Runtime's
    // libraries and threads, its worker), and what each further one adds beyond its weights and its
    // worker, which the limit counts (a session's buffers).
    await infer('w0');
    const one = (await rss('VmRSS')) - rest;
    await infer('w1');
    const perInstance = (await rss('VmRSS')) - rest - one - weights - INSTANCE_WORKER_BYTES;
    for (let round = 0; round < 2; round++) for (const name of names) await infer(name);
    const peak = (await rss('VmHWM')) - rest;
    // The first model's growth keeps its worker in the share: a worker's memory freed by an eviction is not
    // always given back to the system before the next load's worker starts (the peak holds both).
    const share = one - weights + 3 * Math.max(0, perInstance);
    expect(await metric(server, 'batchwise_model_evictions_total')).toBeGreaterThanOrEqual(13);
    // 15%: the allocator's timing moves the peak by a few MB between runs (1.1x was passed by 0.7 MB in one);
    // all eight models resident would be about 1.5x.
    expect(
      peak,
      `peak ${peak} over rest; limit ${limit}, runtime share ${share} (first ${one}, per instance ${perInstance})`,
    ).toBeLessThanOrEqual(1.15 * (limit + share));
  });
});
