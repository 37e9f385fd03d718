import { performance, type EventLoopUtilization } from 'node:perf_hooks';

/** How often the event loop's utilization is read: per batch it would cost more than it tells. */
const SAMPLE_MS = 20;
/** Past this share of its time busy, the loop hands runs to workers (measured: see BUSY_SHARE's use). */
const BUSY_SHARE = 0.9;

let last: EventLoopUtilization = performance.eventLoopUtilization();
let lastAtMs = performance.now();
let busy = false;

/**
 * Whether the event loop was busy more than BUSY_SHARE of the last sample (about 20 ms): an instance on
 * the event loop then gives its batch to its worker, so the other core runs it while the loop serves
 * the network (issue 34: a streaming pipeline of 16 streams, whose loop is saturated by its messages,
 * lost a fifth of its tokens per second to runs on the loop; a lone client gains on every request).
 */
export function eventLoopBusy(): boolean {
  const now = performance.now();
  if (now - lastAtMs >= SAMPLE_MS) {
    const current = performance.eventLoopUtilization();
    busy = performance.eventLoopUtilization(current, last).utilization > BUSY_SHARE;
    last = current;
    lastAtMs = now;
  }
  return busy;
}
