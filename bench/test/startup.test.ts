import { describe, expect, it } from 'vitest';
import { runStartup } from '../src/scenarios/startup.ts';

const ROOT = new URL('../..', import.meta.url).pathname.replace(/\/$/, '');

describe('bench startup (smoke)', () => {
  // Warm starts only: a cold one empties this checkout's node_modules/.cache, which the tests running beside it use.
  it('times `pnpm start` and the compiled server of this checkout to ready, with the CPU they used', async () => {
    const measurements = await runStartup({
      checkouts: [ROOT],
      rounds: 1,
      starts: [
        { target: 'compiled', cache: 'warm' },
        { target: 'pnpm start', cache: 'warm' },
      ],
      log: () => undefined,
      name: 'smoke-startup',
    });
    expect(measurements.map((m) => m.target)).toEqual(['compiled', 'pnpm start']);
    for (const m of measurements) {
      expect(m.listeningMs).toBeGreaterThan(0);
      expect(m.readyMs).toBeGreaterThan(m.listeningMs);
      expect(m.cpuMs).toBeGreaterThan(0);
    }
  });
});
