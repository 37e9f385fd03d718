import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { heapGrowingPercent, heapGrowingPercentGiven, keepOldGenerationRoom, OLD_GENERATION_ROOM_BYTES } from './old-generation-room.ts';

const MB = 1024 * 1024;

describe('the old generation room (issue 44)', () => {
  it('asks for the growing factor that leaves 64 MB above the live heap, up to V8 own largest (4x)', () => {
    expect(OLD_GENERATION_ROOM_BYTES).toBe(64 * MB);
    expect(heapGrowingPercent(21 * MB)).toBe(300); // 21 MB would want 305%
    expect(heapGrowingPercent(32 * MB)).toBe(200);
    expect(heapGrowingPercent(40 * MB)).toBe(160);
    expect(heapGrowingPercent(63 * MB)).toBe(110); // 101.6%, rounded up to a multiple of 10
    expect(heapGrowingPercent(0)).toBe(300);
    // A heap past the room keeps V8's own factor.
    expect(heapGrowingPercent(64 * MB)).toBe(0);
    expect(heapGrowingPercent(500 * MB)).toBe(0);
  });

  it('knows when node was given its own --heap-growing-percent', () => {
    expect(heapGrowingPercentGiven(['--conditions=batchwise-dist', '--heap-growing-percent=50'])).toBe(true);
    expect(heapGrowingPercentGiven(['--heap_growing_percent', '50'])).toBe(true);
    expect(heapGrowingPercentGiven(['--conditions=batchwise-dist', '--max-semi-space-size=8'])).toBe(false);
  });

  let stop: (() => void) | undefined;
  afterEach(() => {
    stop?.();
    setFlagsFromString('--heap-growing-percent=0');
  });

  it('sets the percent at once, and again after a full collection finds the heap grown', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    gc();
    const changes: { percent: number; heapBytes: number }[] = [];
    // A room of twice this process's heap (about 200%), whatever the test runner holds.
    const room = 2 * process.memoryUsage().heapUsed;
    stop = keepOldGenerationRoom((percent, heapBytes) => changes.push({ percent, heapBytes }), room);
    expect(changes).toHaveLength(1);
    expect(changes[0]!.percent).toBe(heapGrowingPercent(changes[0]!.heapBytes, room));
    expect(changes[0]!.percent).toBeGreaterThanOrEqual(190);

    // Grow the live heap by tens of megabytes, then collect in full: the observer sets a lower percent.
    const kept = Array.from({ length: 400_000 }, (_, i) => ({ i, text: `kept ${i}` }));
    gc();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(kept).toHaveLength(400_000);
    expect(changes.length).toBeGreaterThanOrEqual(2);
    const last = changes.at(-1)!;
    expect(last.heapBytes).toBeGreaterThan(changes[0]!.heapBytes);
    expect(last.percent).toBe(heapGrowingPercent(last.heapBytes, room));
    expect(last.percent).toBeLessThan(changes[0]!.percent);
  });
});
