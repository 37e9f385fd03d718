import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../test-support/scheduler.ts';
import { systemClock } from './clock.ts';
import { RefusalTimer } from './refusal-timer.ts';

const MS = 1_000_000n;

describe('RefusalTimer', () => {
  it('runs each callback at its due time, in order of due time, whatever the order they came in', () => {
    const clock = new FakeClock();
    const timer = new RefusalTimer(clock);
    const ran: [string, bigint][] = [];
    const note = (name: string) => () => ran.push([name, clock.nowNs()]);
    timer.at(5n * MS, note('c'));
    timer.at(2n * MS, note('a')); // earlier than the one the timer is armed for: armed again
    timer.at(3n * MS, note('b'));
    timer.at(5n * MS, note('d'));
    expect(timer.size).toBe(4);
    clock.advanceMs(4);
    expect(ran).toEqual([
      ['a', 2n * MS],
      ['b', 3n * MS],
    ]);
    clock.advanceMs(1);
    expect(ran.map(([name]) => name)).toEqual(['a', 'b', 'c', 'd']);
    expect(timer.size).toBe(0);
  });

  it('runs a callback already due on its next firing, and one added by a callback too', () => {
    const clock = new FakeClock();
    const timer = new RefusalTimer(clock);
    const ran: string[] = [];
    clock.advanceMs(10);
    timer.at(1n * MS, () => {
      ran.push('past');
      timer.at(clock.nowNs() + MS, () => ran.push('added'));
    });
    clock.advanceMs(0);
    expect(ran).toEqual(['past']);
    clock.advanceMs(1);
    expect(ran).toEqual(['past', 'added']);
  });

  it('keeps a thousand callbacks in order of due time (the heap)', () => {
    const clock = new FakeClock();
    const timer = new RefusalTimer(clock);
    const dues = Array.from({ length: 1000 }, (_, i) => BigInt((i * 7919) % 1000) * 10_000n);
    const ran: bigint[] = [];
    for (const due of dues) timer.at(due, () => ran.push(due));
    clock.advanceMs(11);
    expect(ran).toEqual([...dues].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
  });

  // Issue 44: a precise timer per refusal polled the clock on every turn of the event loop through its last
  // millisecond, and with refusals due every fraction of a millisecond the loop never slept.
  it('on the real clock never runs a callback early, and the event loop sleeps while callbacks wait', async () => {
    const timer = new RefusalTimer(systemClock);
    const startNs = process.hrtime.bigint();
    const early: bigint[] = [];
    const before = performance.eventLoopUtilization();
    await new Promise<void>((resolve) => {
      let left = 400;
      for (let i = 0; i < 400; i++) {
        // Due every 0.1 ms over 40 ms, 0.05 ms into a millisecond or later: where a millisecond timer alone fires early.
        const dueNs = startNs + 2n * MS + BigInt(i) * 100_000n + 50_000n;
        timer.at(dueNs, () => {
          const lateNs = process.hrtime.bigint() - dueNs;
          if (lateNs < 0n) early.push(lateNs);
          if (--left === 0) resolve();
        });
      }
    });
    const busy = performance.eventLoopUtilization(before);
    expect(early).toEqual([]);
    // Polling the clock on every turn keeps the loop busy all the time (utilization near 1).
    expect(busy.utilization).toBeLessThan(0.5);
  });
});
