/**
 * `batchwise models canary` against real servers: the declaration written into an S3 repository
 * (s3rver) and picked up by a server polling it without reloading either version; `--steps`
 * stepping a healthy canary through to 100% and promoting it, and rolling a failing one back.
 */
import { appendFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpClient } from '@batchwise/client';
import { modelsCommand } from '../packages/server/src/cli/models/index.ts';
import { readConfigWithHistory } from '../packages/server/src/promotion/promotion-history.ts';
import { startTestServer } from './support/server.ts';
import { startTestS3, useS3rverCredentials, waitFor, type TestS3 } from './support/s3.ts';
import { CANARY_INPUT, canaryModelConfig, canaryModelSource, initCount, type CanaryBehaviour } from './support/canary-models.ts';

let dir: string;
let initLog: string;

/** Runs `batchwise models ...` in this process; returns what it printed. */
async function cli(args: string[]): Promise<string> {
  let out = '';
  const command = modelsCommand({ write: (t) => void (out += t), logger: pino({ level: 'silent' }) });
  command.exitOverride();
  command.commands.forEach((c) => c.exitOverride());
  await command.parseAsync(args, { from: 'user' });
  return out;
}

async function metricsText(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

/** Sends unversioned requests until stopped; failures are counted, not thrown. */
function traffic(client: HttpClient, model: string): { stop(): Promise<{ served: Map<string, number>; failed: number }> } {
  let running = true;
  const served = new Map<string, number>();
  let failed = 0;
  const workers = Array.from({ length: 8 }, async () => {
    while (running) {
      await client.infer({ model, inputs: CANARY_INPUT }).then(
        (r) => void served.set(r.modelVersion, (served.get(r.modelVersion) ?? 0) + 1),
        () => void failed++,
      );
    }
  });
  return {
    stop: async () => {
      running = false;
      await Promise.all(workers);
      return { served, failed };
    },
  };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'batchwise-canary-cli-'));
  initLog = join(dir, 'init.log');
  await appendFile(initLog, '');
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('S3 repository', () => {
  let s3: TestS3;
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let http: HttpClient;

  beforeAll(async () => {
    useS3rverCredentials();
    s3 = await startTestS3(join(dir, 's3'));
    await s3.put('prod/m/config.pbtxt', canaryModelConfig('m', 'version_policy { specific { versions: [ 1 ] } }'));
    await s3.put('prod/m/1/model.mjs', canaryModelSource(initLog, 'ok'));
    await s3.put('prod/m/2/model.mjs', canaryModelSource(initLog, 'ok'));
    server = await startTestServer([s3.location('prod')], { modelControlMode: 'poll', repositoryPollSecs: 1 });
    http = new HttpClient({ url: server.url });
  }, 60_000);

  afterAll(async () => {
    await http?.close();
    await server?.close();
    await s3?.close();
  });

  it('models canary writes the split into S3; servers apply it at the next poll, loading only the canary version', async () => {
    expect(new Set((await http.repositoryIndex({ ready: true })).map((e) => `${e.name}/${e.version}`))).toEqual(new Set(['m/1']));
    const out = await cli([
      'canary',
      'm',
      '--version',
      '2',
      '--weight',
      '100',
      '--min-requests',
      '1000000',
      '--model-repository',
      s3.location('prod'),
    ]);
    expect(out).toBe("canary of 'm': version 2 at 100%, version 1 at 0%\n");
    await waitFor(
      async () => (await metricsText(server.metricsPort)).includes('batchwise_canary_weight{model="m",version="2"} 100'),
      20_000,
      'weight 100',
    );
    await waitFor(async () => await http.isModelReady('m', '2'), 20_000, 'version 2');
    const all = new Set<string>();
    for (let i = 0; i < 50; i++) all.add((await http.infer({ model: 'm', inputs: CANARY_INPUT })).modelVersion);
    expect(all).toEqual(new Set(['2']));

    await cli(['canary', 'm', '--version', '2', '--weight', '0', '--model-repository', s3.location('prod')]);
    await waitFor(
      async () => (await metricsText(server.metricsPort)).includes('batchwise_canary_weight{model="m",version="2"} 0'),
      20_000,
      'weight 0',
    );
    all.clear();
    for (let i = 0; i < 50; i++) all.add((await http.infer({ model: 'm', inputs: CANARY_INPUT })).modelVersion);
    expect(all).toEqual(new Set(['1']));
    // Version 1 never reloaded for the split; version 2 loaded once, when the declaration first named it.
    expect([await initCount(initLog, 'm', '1'), await initCount(initLog, 'm', '2')]).toEqual([1, 1]);
  }, 90_000);
});

describe('--steps on a local repository', () => {
  let repo: string;
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let http: HttpClient;

  async function writeModel(name: string, versions: Record<number, CanaryBehaviour>): Promise<void> {
    await mkdir(join(repo, name), { recursive: true });
    await writeFile(join(repo, name, 'config.pbtxt'), canaryModelConfig(name, 'version_policy { specific { versions: [ 1 ] } }'));
    for (const [version, behaviour] of Object.entries(versions)) {
      await mkdir(join(repo, name, version), { recursive: true });
      await writeFile(join(repo, name, version, 'model.mjs'), canaryModelSource(initLog, behaviour));
    }
  }

  beforeAll(async () => {
    repo = join(dir, 'repo');
    await writeModel('good', { 1: 'ok', 2: 'ok' });
    await writeModel('bad', { 1: 'ok', 2: 'fail' });
    server = await startTestServer([repo], { modelControlMode: 'poll', repositoryPollSecs: 1 });
    http = new HttpClient({ url: server.url });
  }, 60_000);

  afterAll(async () => {
    await http?.close();
    await server?.close();
  });

  const stepArgs = (model: string) => [
    'canary',
    model,
    '--version',
    '2',
    '--steps',
    '30,100',
    '--interval',
    '3s',
    '--min-requests',
    '10',
    '--max-p99-ratio',
    '1000',
    '--metrics-url',
    `http://127.0.0.1:${server.metricsPort}/metrics`,
    '--model-repository',
    repo,
  ];

  it('steps a healthy canary through to 100% and promotes it as models promote does', async () => {
    const load = traffic(http, 'good');
    let out: string;
    try {
      out = await cli(stepArgs('good'));
    } finally {
      const { failed } = await load.stop();
      expect(failed).toBe(0);
    }
    expect(out).toMatch(/step 1\/2: canary version 2 at 30% \(stable version 1\)/);
    expect(out).toMatch(/step 1\/2: healthy: /);
    expect(out).toMatch(/step 2\/2: healthy: /);
    expect(out).toMatch(/step 2\/2: canary version 2 at 100%/);
    expect(out).toContain("promoted: 'good' now serves version 2 (was 1); canary.json removed");
    const { config, history } = readConfigWithHistory(await readFile(join(repo, 'good', 'config.pbtxt'), 'utf8'));
    expect(config.version_policy?.specific?.versions).toEqual([2]);
    expect(history.at(-1)).toMatchObject({ action: 'promote', version: 2, from: 1 });
    await expect(readFile(join(repo, 'good', 'canary.json'))).rejects.toThrow(/ENOENT/);
  }, 90_000);

  it('models rollback removes the canary declaration of the model it rolls back', async () => {
    await cli(['canary', 'good', '--version', '1', '--weight', '10', '--model-repository', repo]);
    expect(JSON.parse(await readFile(join(repo, 'good', 'canary.json'), 'utf8'))).toMatchObject({
      stable_version: '2',
      canary_version: '1',
    });
    expect(await cli(['rollback', '--model', 'good', '--model-repository', repo])).toContain(
      "rolled back 'good': now serving version 1 (was 2)",
    );
    await expect(readFile(join(repo, 'good', 'canary.json'))).rejects.toThrow(/ENOENT/);
  });

  it('rolls a failing canary back by itself: weight 0 in the declaration and a non-zero exit with the reason', async () => {
    const load = traffic(http, 'bad');
    try {
      await expect(cli(stepArgs('bad'))).rejects.toThrow(/canary version 2 of 'bad' rolled back at 30%/);
    } finally {
      await load.stop();
    }
    const declaration = JSON.parse(await readFile(join(repo, 'bad', 'canary.json'), 'utf8'));
    expect(declaration).toMatchObject({ stable_version: '1', canary_version: '2', canary_weight: 0 });
    // Still serving version 1 only as the policy says.
    expect(
      readConfigWithHistory(await readFile(join(repo, 'bad', 'config.pbtxt'), 'utf8')).config.version_policy?.specific?.versions,
    ).toEqual([1]);
  }, 90_000);
});
