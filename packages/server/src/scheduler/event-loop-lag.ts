import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/** How often the recent lag is read (and the histogram started afresh). */
const WINDOW_MS = 100;
/** The histogram's timer period: the smallest lag it sees. */
const RESOLUTION_MS = 1;

/**
 * How long a request that reaches a socket now waits before the event loop reads it, recently:
 * half the time a turn of the loop has lately taken beyond a 1 ms timer's period (a request
 * lands, on average, halfway through a turn), measured over the last 100 ms. Its reply waits
 * about as long again after its batch: time the latency objective counts (issue 30) and the
 * server's own clocks cannot see. Started by the first reader, so servers without an objective
 * pay nothing; its timers do not keep the process alive.
 */
export class EventLoopLag {
  private histogram: IntervalHistogram | undefined;
  private recentNs = 0;

  /** The recent mean lag, nanoseconds; 0 until the first window has passed. */
  nowNs(): number {
    if (!this.histogram) this.start();
    return this.recentNs;
  }

  private start(): void {
    const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    histogram.enable();
    this.histogram = histogram;
    const read = setInterval(() => {
      // Each sample is the time between the timer's callbacks: its own period, and the turn it waited for.
      const busyNs = histogram.count > 0 ? histogram.mean - RESOLUTION_MS * 1e6 : 0;
      this.recentNs = Number.isFinite(busyNs) && busyNs > 0 ? busyNs / 2 : 0;
      histogram.reset();
    }, WINDOW_MS);
    read.unref();
  }
}

export const eventLoopLag = new EventLoopLag();
