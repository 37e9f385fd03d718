/**
 * Weighted canary releases on a real server polling a local repository: the split of requests
 * that name no version, stickiness over HTTP and gRPC, version-named requests bypassing the
 * split, a split change picked up without reloading either version, and bad canaries (one that
 * fails, one that is slow) rolled back by the server while no request to the stable version fails.
 */
import { appendFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, HttpClient } from '@batchwise/client';
import { startTestServer } from './support/server.ts';
import { waitFor } from './support/wait-for.ts';
import {
  CANARY_INPUT as input,
  canaryModelConfig as config,
  canaryModelSource as modelSource,
  initCount as countInits,
} from './support/canary-models.ts';

let dir: string;
let initLog: string;
let server: Awaited<ReturnType<typeof startTestServer>>;
let http: HttpClient;

async function writeModel(name: string, versions: Record<number, 'ok' | 'fail' | 'slow'>, canary: unknown): Promise<void> {
  await mkdir(join(dir, name), { recursive: true });
  await writeFile(join(dir, name, 'config.pbtxt'), config(name));
  for (const [version, behaviour] of Object.entries(versions)) {
    await mkdir(join(dir, name, version), { recursive: true });
    await writeFile(join(dir, name, version, 'model.mjs'), modelSource(initLog, behaviour));
  }
  await writeFile(join(dir, name, 'canary.json'), JSON.stringify(canary));
}

const NEVER = { min_requests: 1_000_000 };

/** Versions that served `count` unversioned requests of `model`, sent `concurrency` at a time. */
async function served(client: HttpClient, model: string, count: number, concurrency = 32, version?: string): Promise<string[]> {
  const versions: string[] = [];
  for (let sent = 0; sent < count; sent += concurrency) {
    const batch = Array.from({ length: Math.min(concurrency, count - sent) }, () =>
      client.infer({ model, ...(version !== undefined && { version }), inputs: input }),
    );
    for (const result of await Promise.all(batch)) versions.push(result.modelVersion);
  }
  return versions;
}

async function metricsText(): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`);
  return response.text();
}

const initCount = (model: string, version: string) => countInits(initLog, model, version);
/** A canary.json with stable version 1. */
const declare = (canary: string, weight: number, rollback: object) => ({
  stable_version: '1',
  canary_version: canary,
  canary_weight: weight,
  rollback,
});

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'batchwise-canary-'));
  initLog = join(await mkdtemp(join(tmpdir(), 'batchwise-canary-log-')), 'init.log');
  await appendFile(initLog, '');
  await writeModel('split', { 1: 'ok', 2: 'ok' }, declare('2', 20, NEVER));
  await writeModel(
    'flaky',
    { 1: 'ok', 3: 'fail' },
    declare('3', 30, { window_seconds: 30, min_requests: 20, max_error_rate_increase: 0.05 }),
  );
  await writeModel(
    'sluggish',
    { 1: 'ok', 2: 'slow' },
    declare('2', 50, { window_seconds: 60, min_requests: 10, max_error_rate_increase: 1, max_p99_ratio: 2 }),
  );
  server = await startTestServer([dir], { modelControlMode: 'poll', repositoryPollSecs: 1 });
  http = new HttpClient({ url: server.url });
}, 60_000);

afterAll(async () => {
  await http?.close();
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('the split', () => {
  it("serves both declared versions (the declaration adds the stable one to the version policy's latest 1)", async () => {
    expect((await http.repositoryIndex()).filter((e) => e.name === 'split').map((e) => e.version)).toEqual(['1', '2']);
    expect(await metricsText()).toMatch(/batchwise_canary_weight\{model="split",version="2"\} 20/);
    expect(await metricsText()).toMatch(/batchwise_canary_weight\{model="split",version="1"\} 80/);
  });

  it('sends the declared share of unversioned requests to the canary, within a binomial bound', async () => {
    const n = 3000;
    const versions = await served(http, 'split', n);
    const canary = versions.filter((v) => v === '2').length;
    expect(versions.filter((v) => v !== '1' && v !== '2')).toEqual([]);
    // 20% of 3000 = 600, sd = sqrt(3000 * 0.2 * 0.8) ~ 21.9: 6 sd either side never flakes.
    expect(canary).toBeGreaterThan(600 - 6 * 22);
    expect(canary).toBeLessThan(600 + 6 * 22);
  }, 120_000);

  it('keeps one stickiness key on one version, the same over HTTP (header) and gRPC (metadata)', async () => {
    const byKey = new Map<string, Set<string>>();
    for (let k = 0; k < 60; k++) {
      const key = `user-${k}`;
      const keyed = new HttpClient({ url: server.url, headers: { 'batchwise-canary-key': key } });
      const grpc = new GrpcClient({ url: `127.0.0.1:${server.grpcPort}`, metadata: { 'batchwise-canary-key': key } });
      try {
        const seen = new Set([...(await served(keyed, 'split', 4, 4))]);
        for (let i = 0; i < 2; i++) seen.add((await grpc.infer({ model: 'split', inputs: input })).modelVersion);
        byKey.set(key, seen);
      } finally {
        await keyed.close();
        grpc.close();
      }
    }
    for (const seen of byKey.values()) expect(seen.size).toBe(1);
    // 60 keys at 20%: all on one side has a chance of 0.8^60 + 0.2^60 (1.5e-6).
    const sides = new Set([...byKey.values()].map((s) => [...s][0]));
    expect(sides).toEqual(new Set(['1', '2']));
  }, 120_000);

  it('sends a request that names a version to that version, whatever the split', async () => {
    expect(new Set(await served(http, 'split', 100, 32, '1'))).toEqual(new Set(['1']));
    expect(new Set(await served(http, 'split', 100, 32, '2'))).toEqual(new Set(['2']));
  });

  it('picks up a new weight from the repository at the next poll, without reloading either version', async () => {
    const loadsBefore = [await initCount('split', '1'), await initCount('split', '2')];
    expect(loadsBefore).toEqual([1, 1]);
    await writeFile(join(dir, 'split', 'canary.json'), JSON.stringify(declare('2', 100, NEVER)));
    await waitFor(
      async () => (await metricsText()).includes('batchwise_canary_weight{model="split",version="2"} 100'),
      15_000,
      'weight 100',
    );
    expect(new Set(await served(http, 'split', 200))).toEqual(new Set(['2']));
    await writeFile(join(dir, 'split', 'canary.json'), JSON.stringify(declare('2', 0, NEVER)));
    await waitFor(async () => (await metricsText()).includes('batchwise_canary_weight{model="split",version="2"} 0'), 15_000, 'weight 0');
    expect(new Set(await served(http, 'split', 200))).toEqual(new Set(['1']));
    // Neither version loaded again: initialize() ran once per version.
    expect([await initCount('split', '1'), await initCount('split', '2')]).toEqual([1, 1]);
  }, 60_000);
});

describe('rollback', () => {
  it('stops sending unversioned requests to a failing canary, and no request to the stable version fails', async () => {
    let stableFailures = 0;
    let stableServed = 0;
    // Requests naming the stable version run beside the split the whole time.
    const toStable = async () => {
      for (let i = 0; i < 8; i++) {
        await http.infer({ model: 'flaky', version: '1', inputs: input }).then(
          () => stableServed++,
          () => stableFailures++,
        );
      }
    };
    const failedUnversioned: string[] = [];
    await waitFor(
      async () => {
        await Promise.all([
          toStable(),
          ...Array.from({ length: 16 }, () =>
            http.infer({ model: 'flaky', inputs: input }).then(
              (r) => expect(r.modelVersion).toBe('1'),
              (e: Error) => failedUnversioned.push(e.message),
            ),
          ),
        ]);
        return (await metricsText()).includes('batchwise_canary_rollbacks_total{model="flaky",reason="error_rate"} 1');
      },
      60_000,
      'the rollback',
    );
    expect(failedUnversioned.length).toBeGreaterThan(0);
    for (const message of failedUnversioned) expect(message).toContain('canary is broken');
    expect(stableFailures).toBe(0);
    expect(stableServed).toBeGreaterThan(0);
    expect(await metricsText()).toContain('batchwise_canary_weight{model="flaky",version="3"} 0');
    // Rolled back: every unversioned request goes to the stable version and succeeds.
    expect(new Set(await served(http, 'flaky', 200))).toEqual(new Set(['1']));
  }, 90_000);

  it('rolls a slow canary back on its p99', async () => {
    await waitFor(
      async () => {
        await served(http, 'sluggish', 64, 32);
        return (await metricsText()).includes('batchwise_canary_rollbacks_total{model="sluggish",reason="latency"} 1');
      },
      60_000,
      'the latency rollback',
    );
    expect(new Set(await served(http, 'sluggish', 100))).toEqual(new Set(['1']));
  }, 90_000);

  it('keeps the split in force, and both versions, while a new declaration is invalid', async () => {
    await writeFile(join(dir, 'split', 'canary.json'), JSON.stringify({ ...declare('2', 50, NEVER), canary_weight: 'half' }));
    // Two polls later: still weight 0 (the last valid declaration) and both versions serve.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect(await metricsText()).toContain('batchwise_canary_weight{model="split",version="2"} 0');
    expect(await http.isModelReady('split', '2')).toBe(true);
    expect(new Set(await served(http, 'split', 50))).toEqual(new Set(['1']));
  }, 30_000);

  it('keeps a rolled-back canary rolled back until the declaration changes', async () => {
    // A poll later (same text): still rolled back.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await metricsText()).toContain('batchwise_canary_weight{model="flaky",version="3"} 0');
    await writeFile(join(dir, 'flaky', 'canary.json'), JSON.stringify(declare('3', 10, NEVER)));
    await waitFor(async () => (await metricsText()).includes('batchwise_canary_weight{model="flaky",version="3"} 10'), 15_000, 'weight 10');
  }, 30_000);
});
