import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { slowModel } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { startChildServer } from './support/child-server.ts';

const config = `
name: "slow"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 256 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 256 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
`;

describe('SIGTERM under load', () => {
  let repo: Awaited<ReturnType<typeof makeRepository>>;
  beforeAll(async () => {
    repo = await makeRepository([{ name: 'slow', model: slowModel({ repeats: 2000, width: 256 }), config }]);
  });
  afterAll(() => repo.remove());

  it('goes unready at once, completes every admitted request, and exits 0', async () => {
    const server = await startChildServer(['--model-repository', repo.dir, '--shutdown-grace-secs', '1']);
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 256], data: new Array(256).fill(0.1) }] });
    const infer = () =>
      fetch(`${server.url}/v2/models/slow/infer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(
        (r) => r.status,
        () => 'refused' as const,
      );

    let stop = false;
    const statuses: (number | 'refused')[] = [];
    const clients = Array.from({ length: 4 }, async () => {
      while (!stop) statuses.push(await infer());
    });
    await new Promise((r) => setTimeout(r, 500));
    const before = statuses.length;
    server.process.kill('SIGTERM');
    const t0 = Date.now();
    let readyStatus = 200;
    while (Date.now() - t0 < 800) {
      readyStatus = (await fetch(`${server.url}/v2/health/ready`)).status;
      if (readyStatus !== 200) break;
    }
    expect(readyStatus).toBe(400);
    expect(Date.now() - t0).toBeLessThan(500);

    const code = await server.exited;
    stop = true;
    await Promise.all(clients);
    expect(code).toBe(0);
    expect(before).toBeGreaterThan(0);
    // Every request the server admitted completed: nothing but 200s, and refusals only after it closed.
    const admitted = statuses.filter((s) => s !== 'refused');
    expect(admitted.every((s) => s === 200 || s === 503), JSON.stringify(statuses)).toBe(true);
    expect(admitted.filter((s) => s === 200).length).toBeGreaterThan(before);
    expect(server.logs.some((l: any) => l.msg === 'drained; exiting')).toBe(true);
  });
});
