import { PerformanceObserver, constants } from 'node:perf_hooks';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';

/**
 * The room the serving process keeps between its live JavaScript heap and V8's old-generation limit: more
 * than V8's young generation (Node 20's 16 MB semi-spaces make 48 MB of it).
 *
 * V8 schedules incremental marking once that room is less than the young generation's capacity (its soft
 * marking limit; with 4 MB semi-spaces the cycle below was gone, with 8 MB it stayed). After a full
 * collection V8 sets the limit from the live heap times a growing factor, which for the server's heap of
 * about 21 MB left 23 MB of room. Under batching at 16 clients that started a full mark-compact every 0.35 s
 * (17 in 6 s, against one scavenge), with incremental steps of up to 15 ms on the event loop. It was a
 * quarter of the main thread's busy time, and the collector's helper threads took more beside it (issue 44,
 * bench/runs/2026-11-30-issue-44-floors.md).
 */
export const OLD_GENERATION_ROOM_BYTES = 64 * 1024 * 1024;

/** V8's own largest growing factor is 4 (1 + 300%). */
const MAX_GROWING_PERCENT = 300;

/**
 * The `--heap-growing-percent` that leaves `roomBytes` above a live heap of `liveBytes` (rounded up to a
 * multiple of 10, at most 300%), or 0, V8's own growing factor, for a heap that is already larger than
 * the room.
 */
export function heapGrowingPercent(liveBytes: number, roomBytes: number = OLD_GENERATION_ROOM_BYTES): number {
  if (liveBytes >= roomBytes) return 0;
  return Math.min(MAX_GROWING_PERCENT, Math.ceil((10 * roomBytes) / Math.max(liveBytes, 1)) * 10);
}

/**
 * Keeps `roomBytes` of room above the live heap: sets V8's `--heap-growing-percent` now and again after
 * each full collection, from the heap's size then. V8 reads it whenever it sets the limit, so it takes
 * effect from the next full collection on, in this process's threads (worker threads included).
 * `onChange` is told each percent set, and the heap it was set for. Returns a function that stops watching.
 */
export function keepOldGenerationRoom(
  onChange?: (percent: number, heapBytes: number) => void,
  roomBytes: number = OLD_GENERATION_ROOM_BYTES,
): () => void {
  let current: number | undefined;
  const adjust = () => {
    const heapBytes = getHeapStatistics().used_heap_size;
    const percent = heapGrowingPercent(heapBytes, roomBytes);
    if (percent === current) return;
    current = percent;
    setFlagsFromString(`--heap-growing-percent=${percent}`);
    onChange?.(percent, heapBytes);
  };
  adjust();
  const observer = new PerformanceObserver((list) => {
    if (list.getEntries().some(isFullCollection)) adjust();
  });
  observer.observe({ entryTypes: ['gc'] });
  return () => observer.disconnect();
}

/** A `gc` performance entry of a full collection (mark-compact). */
function isFullCollection(entry: object): boolean {
  return (entry as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR;
}

/** Whether node was started with its own `--heap-growing-percent`, which the server then leaves as given. */
export function heapGrowingPercentGiven(execArgv: readonly string[] = process.execArgv): boolean {
  return execArgv.some((arg) => /^--heap[-_]growing[-_]percent(=|$)/.test(arg));
}
