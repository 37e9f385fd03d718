import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SupervisedWorker, type WorkerLike } from './worker-supervision.ts';

/** A runner that dies when told to: what supervision sees of a worker thread or a stub process. */
class Runner extends EventEmitter implements WorkerLike {
  postMessage(): void {}
  terminate(): Promise<number> {
    this.emit('exit', 1);
    return Promise.resolve(1);
  }
  crash(how = 'killed by SIGSEGV'): void {
    this.emit('error', new Error(how));
    this.emit('exit', -1);
  }
}

describe('SupervisedWorker restart back-off', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('restarts a runner that keeps dying after 100, 200, 400 ms, then at the cap, and never gives up', async () => {
    const spawned: Runner[] = [];
    const deaths: string[] = [];
    let fatal: Error | undefined;
    const first = new Runner();
    const supervised = new SupervisedWorker<unknown, Runner>(first, {
      spawn: () => {
        const runner = new Runner();
        spawned.push(runner);
        return runner;
      },
      load: async (runner) => runner,
      backoff: { firstMs: 100, maxMs: 400 },
      instance: "model instance of 'm'",
      onMessage: () => undefined,
      onDeath: (how) => deaths.push(how),
      closeGraceMs: 10,
    });
    supervised.onFatal = (error) => (fatal = error);
    let current = first;
    for (const waitMs of [100, 200, 400, 400, 400]) {
      current.crash();
      const before = spawned.length;
      await vi.advanceTimersByTimeAsync(waitMs - 1);
      expect(spawned.length).toBe(before);
      await vi.advanceTimersByTimeAsync(1);
      expect(spawned.length).toBe(before + 1);
      current = spawned.at(-1)!;
      expect(await supervised.ready()).toBe(current);
    }
    expect(deaths).toEqual(new Array(5).fill('killed by SIGSEGV'));
    expect(fatal).toBeUndefined();
  });

  it('without a back-off, gives up after more than 3 deaths a minute (worker threads)', async () => {
    let fatal: Error | undefined;
    let current = new Runner();
    const supervised = new SupervisedWorker<unknown, Runner>(current, {
      spawn: () => (current = new Runner()),
      load: async (runner) => runner,
      instance: "model instance of 'm'",
      onMessage: () => undefined,
      onDeath: () => undefined,
      closeGraceMs: 10,
    });
    supervised.onFatal = (error) => (fatal = error);
    for (let i = 0; i < 4; i++) {
      current.crash('exited with code 1');
      await vi.advanceTimersByTimeAsync(0);
    }
    expect(fatal?.message).toMatch(/crashed 4 times in 60 s \(last: exited with code 1\); not restarted/);
    await expect(supervised.ready()).rejects.toThrow(/not restarted/);
  });
});
