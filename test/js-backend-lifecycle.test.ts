/**
 * A JavaScript model's lifecycle on a real server in explicit model control: what initialize()
 * receives, one worker per instance, and finalize() when the version unloads.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { HttpClient } from '@batchwise/client';
import { startTestServer } from './support/server.ts';

/** Answers with the instance it ran on and the thread's id; writes what initialize() got, and a mark in finalize(). */
const RECORDER = `
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';
import { tensor } from '@batchwise/backend';
export default class {
  initialize(args) {
    this.args = args;
    writeFileSync(join(args.versionDir, 'init-' + args.instanceName + '.json'), JSON.stringify(args));
  }
  async execute(requests) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    return requests.map(() => ({ outputs: [tensor('WHO', 'BYTES', [1], [this.args.instanceName + '@' + threadId])] }));
  }
  finalize() {
    writeFileSync(join(this.args.versionDir, 'finalized-' + this.args.instanceName), 'yes');
  }
}
`;
const CONFIG = `name: "recorder"
backend: "js"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "WHO" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { name: "pool" kind: KIND_CPU count: 2 } ]
`;

let dir: string;
let server: Awaited<ReturnType<typeof startTestServer>>;
let http: HttpClient;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'batchwise-js-'));
  await mkdir(join(dir, 'recorder', '1'), { recursive: true });
  await writeFile(join(dir, 'recorder', 'config.pbtxt'), CONFIG);
  await writeFile(join(dir, 'recorder', '1', 'model.mjs'), RECORDER);
  server = await startTestServer([dir], { modelControlMode: 'explicit' });
  http = new HttpClient({ url: server.url });
});

afterAll(async () => {
  await http?.close();
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

it('initializes each instance in its own worker with Triton-like args, runs them in parallel, and finalizes them on unload', async () => {
  await http.loadModel('recorder');
  const versionDir = join(dir, 'recorder', '1');
  const args = JSON.parse(await readFile(join(versionDir, 'init-pool_0.json'), 'utf8'));
  expect(args).toMatchObject({
    modelName: 'recorder',
    modelVersion: '1',
    instanceName: 'pool_0',
    instanceKind: 'KIND_CPU',
    deviceId: 0,
    modelDir: join(dir, 'recorder'),
    versionDir,
  });
  expect(args.config).toMatchObject({ name: 'recorder', backend: 'js', max_batch_size: 0, instance_group: [{ name: 'pool', count: 2 }] });

  const answers = await Promise.all(
    [1, 2, 3, 4].map(() => http.infer({ model: 'recorder', inputs: [{ name: 'X', datatype: 'FP32', shape: [1], data: [0] }] })),
  );
  const who = new Set(answers.map((a) => Buffer.from((a.outputs[0]!.data as Uint8Array[])[0]!).toString()));
  expect([...who].map((w) => w.split('@')[0]).sort()).toEqual(['pool_0', 'pool_1']);
  expect(new Set([...who].map((w) => w.split('@')[1])).size).toBe(2);

  await http.unloadModel('recorder');
  await expect.poll(() => readFile(join(versionDir, 'finalized-pool_1'), 'utf8').catch(() => ''), { timeout: 10_000 }).toBe('yes');
  expect(await readFile(join(versionDir, 'finalized-pool_0'), 'utf8')).toBe('yes');
});
