/**
 * The gaps issue 27 left in --load-on-demand (issue 37), on real servers:
 * - a model added to the repository after the server listed it loads on its first request, without
 *   waiting for a listing (none mode never lists again; poll mode would after its interval), from a
 *   local folder and from S3 (s3rver), with one look under the model's own prefix;
 * - each model instance's worker thread counts against --model-memory-limit beside its weights, and an
 *   instance that runs on the event loop gives that share back.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identity, serializeModel } from '@batchwise/modelgen';
import { INSTANCE_WORKER_BYTES } from '../packages/server/src/memory/model-footprint.ts';
import { identityConfig, makeRepository } from './support/repository.ts';
import { postJson, startTestServer } from './support/server.ts';
import { startTestS3, useS3rverCredentials, type TestS3 } from './support/s3.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const body = { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] };
const infer = (server: Server, model: string) => postJson(`${server.url}/v2/models/${model}/infer`, body);
const index = async (server: Server) =>
  (await postJson(`${server.url}/v2/repository/index`, {})).json as { name: string; state?: string; reason?: string }[];
const metric = async (server: Server, name: string) => {
  const text = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
};

describe('a model added after the listing loads on its first request (local folder, none mode)', () => {
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let server: Server;

  beforeAll(async () => {
    repo = await makeRepository([{ name: 'first', model: identity('FP32', [4]), config: identityConfig('first') }]);
    server = await startTestServer([repo.dir], { loadOnDemand: true });
  });
  afterAll(async () => {
    await server?.close();
    await repo?.remove();
  });

  it('answers a name no repository has as unknown, then serves it once it is added, with no listing in between', async () => {
    expect(await infer(server, 'late')).toEqual({ status: 400, json: { error: "Request for unknown model: 'late' is not found" } });
    expect((await index(server)).map((row) => row.name)).toEqual(['first']);
    await mkdir(join(repo.dir, 'late', '1'), { recursive: true });
    await writeFile(join(repo.dir, 'late', 'config.pbtxt'), identityConfig('late'));
    await writeFile(join(repo.dir, 'late', '1', 'model.onnx'), serializeModel(identity('FP32', [4])));
    // A name missed is answered from memory for a second (MISS_MEMORY_MS): the request after that finds it.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const answer = await infer(server, 'late');
    expect(answer.status).toBe(200);
    expect(answer.json.outputs[0].data).toEqual([1, 2, 3, 4]);
    expect((await index(server)).find((row) => row.name === 'late')).toMatchObject({ state: 'READY' });
  });
});

describe('a model added after the listing loads on its first request (S3, poll mode with a long interval)', () => {
  let dir: string;
  let s3: TestS3;
  let server: Server;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batchwise-on-demand-s3-'));
    s3 = await startTestS3(join(dir, 's3'));
    useS3rverCredentials();
    await s3.put('repo/first/config.pbtxt', identityConfig('first'));
    await s3.put('repo/first/1/model.onnx', serializeModel(identity('FP32', [4])));
    server = await startTestServer([s3.location('repo')], {
      loadOnDemand: true,
      modelControlMode: 'poll',
      repositoryPollSecs: 3600,
      modelFilter: ['first', 'late*'],
    });
  });
  afterAll(async () => {
    await server?.close();
    await s3?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('looks under the model prefix alone, and never for a model outside the filter', async () => {
    await s3.put('repo/late-a/config.pbtxt', identityConfig('late-a'));
    await s3.put('repo/late-a/1/model.onnx', serializeModel(identity('FP32', [4])));
    await s3.put('repo/other/config.pbtxt', identityConfig('other'));
    await s3.put('repo/other/1/model.onnx', serializeModel(identity('FP32', [4])));
    const before = s3.requests.length;
    const answers = await Promise.all([infer(server, 'late-a'), infer(server, 'late-a'), infer(server, 'late-a')]);
    for (const answer of answers) expect(answer.json.outputs[0].data).toEqual([1, 2, 3, 4]);
    const lists = s3.requests.slice(before).filter((r) => r.method === 'GET' && /[?&]list-type=2/.test(r.url));
    // One listing for the three requests, under the model's prefix (the repository's own listing has prefix repo/).
    expect(lists.map((r) => decodeURIComponent(/[?&]prefix=([^&]*)/.exec(r.url)![1]!))).toEqual(['repo/late-a/']);
    const outside = s3.requests.length;
    expect(await infer(server, 'other')).toEqual({ status: 400, json: { error: "Request for unknown model: 'other' is not found" } });
    expect(s3.requests.length).toBe(outside);
    expect((await index(server)).map((row) => [row.name, row.state])).toEqual([
      ['first', 'UNAVAILABLE'],
      ['late-a', 'READY'],
    ]);
  });
});

describe("an instance's worker thread counts against --model-memory-limit", () => {
  /** A JavaScript model that passes INPUT0 on: no weights, one worker thread per instance. */
  const passThrough = (name: string, instances = 1) => ({
    name,
    config: `${identityConfig(name, `backend: "js"\ninstance_group [ { kind: KIND_CPU count: ${instances} } ]`)}`,
    files: {
      '1/model.mjs': `export default { execute(requests) { return requests.map((r) => ({ outputs: [{ ...r.inputs.INPUT0, name: 'OUTPUT0' }] })); } };\n`,
    },
  });
  const runUs = (name: string, us: number) => ({
    name,
    model: identity('FP32', [4]),
    config: identityConfig(name, `parameters { key: "batchwise_event_loop_run_us" value: { string_value: "${us}" } }`),
  });
  const weights = serializeModel(identity('FP32', [4])).length;
  const limit = 2 * INSTANCE_WORKER_BYTES + 2000;
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  let server: Server;

  beforeAll(async () => {
    repo = await makeRepository([
      passThrough('j1'),
      passThrough('j2'),
      passThrough('j3'),
      passThrough('wide', 3),
      // A run limit no run reaches: the instance moves to the event loop; 0 keeps it in its worker.
      runUs('on-event-loop', 10_000_000),
      runUs('in-worker', 0),
    ]);
    server = await startTestServer([repo.dir], { loadOnDemand: true, modelMemoryLimit: String(limit) });
  });
  afterAll(async () => {
    await server?.close();
    await repo?.remove();
  });

  it('evicts a model without weights to make room for another: each holds its worker', async () => {
    expect((await infer(server, 'j1')).status).toBe(200);
    expect((await infer(server, 'j2')).status).toBe(200);
    expect(await metric(server, 'batchwise_model_memory_bytes')).toBe(2 * INSTANCE_WORKER_BYTES);
    expect((await infer(server, 'j3')).status).toBe(200);
    expect((await index(server)).find((row) => row.name === 'j1')?.reason).toMatch(/^evicted at \S+ to make room for 'j3'/);
    expect(await metric(server, 'batchwise_model_memory_bytes')).toBe(2 * INSTANCE_WORKER_BYTES);
  });

  it('refuses a model whose workers alone exceed the limit, naming them', async () => {
    const { status, json } = await infer(server, 'wide');
    expect(status).toBe(404);
    expect(json.error).toContain(
      `model 'wide' version 1 needs about ${3 * INSTANCE_WORKER_BYTES} bytes of host memory (no ONNX Runtime sessions, 3 worker threads of ` +
        `${INSTANCE_WORKER_BYTES} bytes), more than the ${limit} bytes of --model-memory-limit`,
    );
  });

  it('gives the worker share back for an instance that runs on the event loop, and keeps it for one in a worker', async () => {
    // Room for a worker and the weights is made first (j2, the least recently used, goes); then only the weights stay held.
    expect((await infer(server, 'on-event-loop')).status).toBe(200);
    expect(await metric(server, 'batchwise_model_memory_bytes')).toBe(INSTANCE_WORKER_BYTES + weights);
    // Beside j3 and the model on the event loop, one in a worker fits without evicting.
    expect((await infer(server, 'in-worker')).status).toBe(200);
    expect(await metric(server, 'batchwise_model_memory_bytes')).toBe(2 * INSTANCE_WORKER_BYTES + 2 * weights);
    expect((await index(server)).filter((row) => row.state === 'READY').map((row) => row.name)).toEqual([
      'in-worker',
      'j3',
      'on-event-loop',
    ]);
  });
});
