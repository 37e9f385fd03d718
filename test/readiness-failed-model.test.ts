import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { identity, serializeModel } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { postJson, startTestServer } from './support/server.ts';
import { waitFor } from './support/wait-for.ts';

/**
 * What the ECS task relies on (infra/lib/inference-service.ts runs `--strict-readiness false`):
 * a model that fails to load, picked up by every task's poll at once, must not take the tasks
 * out of the load balancer; the failure shows in batchwise_model_load_failed (and the EMF
 * ModelsFailedToLoad metric the stack alarms on) instead.
 */
const config = (name: string) => `
name: "${name}"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
`;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function pollingServer(strictReadiness: boolean) {
  const repo = await makeRepository([{ name: 'good', model: identity('FP32', [4]), config: config('good') }]);
  const server = await startTestServer([repo.dir], { modelControlMode: 'poll', repositoryPollSecs: 1, strictReadiness });
  cleanups.push(async () => {
    await server.close();
    await repo.remove();
  });
  const failedGauge = async (model: string) => {
    const text = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text();
    return new RegExp(`^batchwise_model_load_failed\\{model="${model}"\\} (\\d+)$`, 'm').exec(text)?.[1];
  };
  const ready = async () => (await fetch(`${server.url}/v2/health/ready`)).status;
  /** A new model whose file is not ONNX arrives in the repository; resolves once its load has failed. */
  const addBrokenModel = async () => {
    await mkdir(join(repo.dir, 'broken', '1'), { recursive: true });
    await writeFile(join(repo.dir, 'broken', 'config.pbtxt'), config('broken'));
    await writeFile(join(repo.dir, 'broken', '1', 'model.onnx'), Buffer.from('not an onnx model'));
    await waitFor(async () => (await failedGauge('broken')) === '1', 15_000, "the broken model's load failed");
  };
  return { repo, server, failedGauge, ready, addBrokenModel };
}

describe('a model that fails to load', () => {
  it('leaves a non-strict server ready and serving the others, and is counted until fixed', async () => {
    const { repo, server, failedGauge, ready, addBrokenModel } = await pollingServer(false);
    expect(await ready()).toBe(200);
    expect(await failedGauge('good')).toBe('0');

    await addBrokenModel();
    expect(await ready()).toBe(200);
    const infer = await postJson(`${server.url}/v2/models/good/infer`, {
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }],
    });
    expect(infer.status).toBe(200);
    expect(await failedGauge('good')).toBe('0');

    // The fix arrives: the next poll loads it and the failure is cleared.
    await writeFile(join(repo.dir, 'broken', '1', 'model.onnx'), serializeModel(identity('FP32', [4])));
    await waitFor(async () => (await failedGauge('broken')) === '0');
    expect(await ready()).toBe(200);
  });

  it("makes a strict server unready (Triton's default, which the stack turns off) until it leaves the repository", async () => {
    const { repo, failedGauge, ready, addBrokenModel } = await pollingServer(true);
    expect(await ready()).toBe(200);
    await addBrokenModel();
    expect(await ready()).not.toBe(200);

    // Gone from the repository: no longer wanted, nothing failed on record.
    await rm(join(repo.dir, 'broken'), { recursive: true });
    await waitFor(async () => (await failedGauge('broken')) === '0');
    expect(await ready()).toBe(200);
  });
});
