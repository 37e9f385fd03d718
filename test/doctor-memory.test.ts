import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runDoctor } from '../packages/server/src/cli/doctor.ts';
import { EXAMPLES } from './support/repository.ts';
import { startTestServer } from './support/server.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

describe('batchwise doctor against a running server', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startTestServer([EXAMPLES], { modelControlMode: 'explicit', loadModels: ['simple'], memoryLimit: '3G' });
  });
  afterAll(() => server.close());

  it("reports the server's budget, accounted bytes, baseline and resident memory, not its own", async () => {
    const checks = await runDoctor({
      expectGpu: false,
      amiFamily: 'al2023',
      json: false,
      serverMetrics: `http://127.0.0.1:${server.metricsPort}/metrics`,
    });
    const memory = checks.find((c) => c.name === 'memory-budget')!;
    expect(memory.ok).toBe(true);
    expect(memory.detail).toMatch(
      new RegExp(
        `^server at http://127\\.0\\.0\\.1:${server.metricsPort}/metrics: budget ${3 * 1024 ** 3} bytes, resident \\d+, held by requests 0, baseline \\(process at rest \\+ models\\) \\d+$`,
      ),
    );
  });

  it('fails the check when the given server does not answer', async () => {
    const checks = await runDoctor({ expectGpu: false, amiFamily: 'al2023', json: false, serverMetrics: 'http://127.0.0.1:9/metrics' });
    expect(checks.find((c) => c.name === 'memory-budget')).toMatchObject({ ok: false, required: true });
  });
});
