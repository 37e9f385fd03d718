import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { identity, serializeModel } from '@batchwise/modelgen';
import type { ModelRegistry } from '../packages/server/src/models/model-registry.ts';
import { defaultCacheDir } from '../packages/server/src/repository/create-model-source.ts';
import { startTestS3, useS3rverCredentials, waitFor, type TestS3 } from './support/s3.ts';
import { postJson, startTestServer } from './support/server.ts';

const config = (name: string) => `
name: "${name}"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
# In a worker thread, which the test crashes to see it restart from the cached files.
parameters { key: "batchwise_event_loop_run_us" value: { string_value: "0" } }
`;
const MODEL = serializeModel(identity('FP32', [4]));

type Server = Awaited<ReturnType<typeof startTestServer>>;
const infer = (server: Server, model: string) =>
  postJson(`${server.url}/v2/models/${model}/infer`, { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] });
const index = async (server: Server) => (await postJson(`${server.url}/v2/repository/index`, {})).json as any[];
const visible = async (dir: string) => (await readdir(dir).catch(() => [])).filter((n) => !n.startsWith('.')).sort();

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function startS3(models: readonly string[]): Promise<TestS3> {
  useS3rverCredentials();
  const dir = await mkdtemp(join(tmpdir(), 'batchwise-s3cache-'));
  const s3 = await startTestS3(join(dir, 's3'));
  // The cache's folder is named by the repository's URL, whose port an earlier test's S3 server (in another file,
  // whose cache was left) may have had: start from none (a clean-clone run once found another test's model 'm' there).
  await rm(defaultCacheDir(s3.location('prod')), { recursive: true, force: true });
  cleanups.push(async () => {
    await s3.close();
    await rm(dir, { recursive: true, force: true });
    await rm(defaultCacheDir(s3.location('prod')), { recursive: true, force: true });
  });
  for (const name of models) {
    await s3.put(`prod/${name}/config.pbtxt`, config(name));
    await s3.put(`prod/${name}/1/model.onnx`, MODEL);
  }
  return s3;
}

async function serve(s3: TestS3, options: Parameters<typeof startTestServer>[1]): Promise<Server> {
  const server = await startTestServer([s3.location('prod')], options);
  cleanups.push(() => server.close());
  return server;
}

describe('the local cache of an S3 repository', () => {
  it("keeps the serving version's files while a newer version fails, and prunes only what nothing loaded reads", async () => {
    const s3 = await startS3(['m']);
    const server = await serve(s3, { modelControlMode: 'poll', repositoryPollSecs: 1 });
    const cached = join(defaultCacheDir(s3.location('prod')), 'm');

    await s3.put('prod/m/2/model.onnx', 'not an onnx model');
    await waitFor(async () => (await index(server)).some((r) => r.version === '2' && r.state === 'UNAVAILABLE'));
    expect(await visible(cached)).toEqual(['1', '2', 'config.pbtxt']);

    // The serving version's instance restarts after a crash from the files in the cache.
    const models = (server.service as unknown as { models: ModelRegistry }).models;
    const [serving] = models.loadedVersions();
    expect(serving!.version).toBe('1');
    await (serving!.instances[0] as unknown as { crashForTesting(): Promise<number> }).crashForTesting();
    const afterCrash = await infer(server, 'm');
    expect(afterCrash.status).toBe(200);
    expect(afterCrash.json.model_version).toBe('1');
    expect((await fetch(`${server.url}/v2/health/ready`)).status).toBe(200);

    // Once version 3 serves and version 1 has drained, neither 1 nor the failed 2 stays cached.
    await s3.put('prod/m/3/model.onnx', MODEL);
    await waitFor(async () => (await infer(server, 'm')).json?.model_version === '3');
    await waitFor(async () => (await visible(cached)).join() === '3,config.pbtxt');
  });

  it('downloads only the models being loaded in explicit mode; a model that fails to download fails alone', async () => {
    const s3 = await startS3(['a', 'b', 'c']);
    // A key that is a file and a folder at once cannot be localized: c alone fails to download.
    await s3.put('prod/c/1/extra', 'file');
    await s3.put('prod/c/1/extra/inner', 'and folder');
    const server = await serve(s3, { modelControlMode: 'explicit', loadModels: ['a'] });
    const cache = defaultCacheDir(s3.location('prod'));
    expect(await visible(cache)).toEqual(['a']);

    const loadB = await postJson(`${server.url}/v2/repository/models/b/load`, {});
    expect(loadB.status).toBe(200);
    expect((await infer(server, 'b')).status).toBe(200);
    expect(await visible(cache)).toEqual(['a', 'b']);

    const loadC = await postJson(`${server.url}/v2/repository/models/c/load`, {});
    expect(loadC.status).toBe(400);
    expect(loadC.json.error).toMatch(/^failed to load 'c': /);
    expect((await infer(server, 'a')).status).toBe(200);
    expect((await postJson(`${server.url}/v2/repository/models/a/load`, {})).status).toBe(200);
  });
});
