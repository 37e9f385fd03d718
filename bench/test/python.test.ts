import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { SMOKE_WINDOWS } from '@batchwise/client/load';
import { RESULTS_DIR } from '../src/report.ts';
import { PYTHON_INSTANCES, runPython } from '../src/scenarios/python.ts';
import { wrkInstalled } from '../src/scenarios/wrk-check.ts';

// A tiny run of `pnpm bench python`, so that the benchmark code keeps working; numbers are not checked.
describe('bench python (smoke)', () => {
  it('the blank and the preprocessing model, JavaScript and Python, all answer; the Python processes count in the server CPU; a check per target', async () => {
    const { measurements, wrk, ratios, checks } = await runPython({
      concurrencies: [1, 16],
      windows: { ...SMOKE_WINDOWS, warmupMs: 50, windowMs: 100 },
      wrkSeconds: 1,
      mirrored: false,
      log: () => undefined,
      name: 'smoke-python',
    });
    expect(measurements.map((m) => `${m.target} c=${m.concurrency}`)).toEqual([
      'js c=1',
      'py c=1',
      'js c=16',
      'py c=16',
      'js_pre c=16',
      'py_pre c=16',
    ]);
    for (const m of measurements) {
      const label = `${m.target} c=${m.concurrency}`;
      expect(m.reading.client.errors, `${label}: ${m.reading.client.firstError}`).toBe(0);
      expect(m.reading.client.throughput, label).toBeGreaterThan(0);
      expect(m.reading.server!.requests, label).toBeGreaterThan(0);
      // /proc counts in 10 ms ticks: one short window of a starved server can read none.
      expect(m.reading.serverCpuMsPerAnswer, label).toBeGreaterThanOrEqual(0);
      // The JavaScript server has no child process; the Python one a process per instance of each of its two models.
      if (m.target.startsWith('js')) expect(m.reading.descendants, label).toBe(0);
      else expect(m.reading.descendants, label).toBeGreaterThanOrEqual(2 * PYTHON_INSTANCES);
    }
    // The stubs' CPU is read: the preprocessing in numpy takes ticks even in a short window.
    expect(measurements.some((m) => m.target.startsWith('py') && m.reading.descendantCpuSeconds! > 0)).toBe(true);
    expect(checks.map((c) => c.target)).toEqual([
      'p50_py_vs_js_c1 <= 1.5',
      'server_cpu_py_vs_js_c1 <= 2',
      'throughput_py_vs_js_c16 >= 0.7',
      'server_cpu_py_vs_js_c16 <= 2',
      ...(wrk.length > 0 ? ['wrk_p50_py_vs_js_c1 <= 1.5'] : []),
    ]);
    expect(ratios['pre_throughput_py_vs_js_c16']).toBeGreaterThan(0);
    if (await wrkInstalled()) {
      expect(wrk.map((w) => `${w.target} c=${w.connections}`)).toEqual(['js c=1', 'py c=1']);
      for (const w of wrk) {
        expect(w.errors).toBe(0);
        expect(w.p50Ms).toBeGreaterThan(0);
      }
    } else expect(wrk).toEqual([]);
    expect(await readFile(`${RESULTS_DIR}smoke-python.md`, 'utf8')).toMatch(/\*\*(PASS|MISS)\*\* throughput_py_vs_js_c16 >= 0\.7: /);
  }, 120_000);
});
