import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { SMOKE_WINDOWS } from '@batchwise/client/load';
import { roundOrder, runBuilds, servingPid, summarize, type BuildsMeasurement } from '../src/scenarios/builds.ts';

const ROOT = new URL('../..', import.meta.url).pathname.replace(/\/$/, '');

describe('bench builds', () => {
  it('rotates the order each round and reverses it every other round, so every target is measured early and late, after either neighbour', () => {
    const targets = ['echo', 'a', 'b', 'c'];
    expect([0, 1, 2, 3].map((r) => roundOrder(targets, r, 4).join(' '))).toEqual(['echo a b c', 'echo c b a', 'b c echo a', 'b a echo c']);
    expect(roundOrder(targets, 1, 2)).toEqual(['a', 'echo', 'c', 'b']);
    expect(roundOrder(['x'], 3, 4)).toEqual(['x']);
  });

  it('summarizes medians over rounds, with ratios over the echo of the same round', () => {
    const m = (round: number, target: string, serverCpuUs: number, p50Ms: number): BuildsMeasurement => ({
      round,
      concurrency: 16,
      model: 'tiny',
      target,
      position: 0,
      throughput: 1000 / p50Ms,
      p50Ms,
      errors: 0,
      serverCpuUs,
      clientCores: 0.3,
    });
    const summary = summarize([
      m(0, 'echo', 50, 1),
      m(0, 'a', 100, 2),
      m(1, 'echo', 100, 1),
      m(1, 'a', 150, 3),
      m(2, 'echo', 50, 1),
      m(2, 'a', 200, 2),
    ]);
    const a = summary.find((s) => s.target === 'a')!;
    expect(a.serverCpuUs).toBe(150);
    // Per round 2, 1.5, 4: the median of the ratios, not the ratio of the medians (150 / 50 = 3).
    expect(a.cpuOverEchoRounds).toEqual([2, 1.5, 4]);
    expect(a.cpuOverEcho).toBe(2);
    expect(a.p50OverEcho).toBe(2);
    expect(summary.find((s) => s.target === 'echo')!.cpuOverEcho).toBe(1);
  });

  it('reads the CPU of the process that serves, not of a launcher that spawned it', async () => {
    // A launcher (a bare node) whose child runs two worker threads, as a server does beside its main thread.
    const child = `const { Worker } = require('node:worker_threads');
      for (let i = 0; i < 2; i++) new Worker('setInterval(() => {}, 1000)', { eval: true });
      setInterval(() => {}, 1000);`;
    const launcher = spawn(
      process.execPath,
      [
        '-e',
        `const c = require('node:child_process').spawn(process.execPath, ['-e', ${JSON.stringify(child)}]); console.log(c.pid); setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let childPid: number | undefined;
    try {
      const [line] = (await once(createInterface({ input: launcher.stdout! }), 'line')) as [string];
      childPid = Number(line);
      // Until the child has started its workers (seconds on two loaded cores): then it has more threads than the launcher.
      const started = Date.now();
      while (servingPid(launcher.pid!) !== childPid && Date.now() - started < 15_000) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(servingPid(launcher.pid!)).toBe(childPid);
    } finally {
      launcher.kill('SIGKILL');
      // The launcher's child outlives it otherwise (it ran on, orphaned, after the suite).
      if (childPid !== undefined) process.kill(childPid, 'SIGKILL');
    }
    const plain = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    try {
      expect(servingPid(plain.pid!)).toBe(plain.pid);
    } finally {
      plain.kill('SIGKILL');
    }
  });

  it('measures a build (this checkout, compiled by the test setup) against the echo (smoke)', async () => {
    const result = await runBuilds({
      builds: [ROOT],
      rounds: 1,
      concurrencies: [4],
      windows: { ...SMOKE_WINDOWS, warmupMs: 50, windowMs: 100 },
      log: () => undefined,
      name: 'smoke-builds',
    });
    expect(result.builds).toHaveLength(1);
    expect(result.measurements.map((m) => `${m.model} ${m.target === 'echo' ? 'echo' : 'build'}`)).toEqual([
      'tiny echo',
      'tiny build',
      'tiny_js echo',
      'tiny_js build',
    ]);
    for (const m of result.measurements) {
      expect(m.errors).toBe(0);
      expect(m.throughput).toBeGreaterThan(0);
    }
    expect(result.summary.filter((s) => s.target !== 'echo').map((s) => s.model)).toEqual(['tiny', 'tiny_js']);
  });
});
