import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { slowModel } from '@batchwise/modelgen';
import { makeRepository } from './support/repository.ts';
import { startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

describe('a long model run never blocks the event loop', () => {
  let server: Server;
  let remove: () => Promise<void>;
  beforeAll(async () => {
    const repo = await makeRepository([{ name: 'slow', model: slowModel({ repeats: 12000, width: 1024 }) }]);
    remove = repo.remove;
    server = await startTestServer([repo.dir]);
  });
  afterAll(async () => {
    await server.close();
    await remove();
  });

  it('answers health checks promptly while a batch runs', async () => {
    const started = performance.now();
    const infer = fetch(`${server.url}/v2/models/slow/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [4, 1024], data: new Array(4 * 1024).fill(0.5) }],
      }),
    });
    await new Promise((r) => setTimeout(r, 100));
    const healthLatencies: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      expect((await fetch(`${server.url}/v2/health/live`)).status).toBe(200);
      healthLatencies.push(performance.now() - t0);
    }
    const response = await infer;
    const runMs = performance.now() - started;
    expect(response.status).toBe(200);
    // The run must be long enough for the test to mean something, and health far quicker.
    expect(runMs).toBeGreaterThan(300);
    expect(Math.max(...healthLatencies)).toBeLessThan(Math.min(150, runMs / 3));
  });
});
