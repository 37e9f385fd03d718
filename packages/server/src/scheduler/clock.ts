/** Time as the scheduler sees it; tests drive a fake one. */
export interface Clock {
  nowNs(): bigint;
  /** Millisecond-grained: good enough for queue timeouts. */
  setTimeout(fn: () => void, delayMs: number): unknown;
  /** Fires `delayNs` from now to within a few microseconds: for max_queue_delay, often well under 1 ms. */
  setPreciseTimeout(fn: () => void, delayNs: bigint): unknown;
  /** Cancels a timer of either kind. */
  clearTimeout(handle: unknown): void;
  /**
   * Runs `fn` once the current turn of the event loop ends: after the I/O callbacks (and
   * their microtasks) already due in this turn, before any timer. setImmediate in Node.
   */
  defer(fn: () => void): void;
  /** How long a request reaching a socket now waits for the event loop to read it (event-loop-lag.ts). */
  lagNs(): number;
}

import { eventLoopLag } from './event-loop-lag.ts';

const NS_PER_MS = 1_000_000n;

/**
 * Node's setTimeout counts whole milliseconds (0.1 ms becomes 1 ms, and it may fire up to a
 * millisecond late), so it sleeps the whole milliseconds and the sub-millisecond rest is
 * checked against the high-resolution clock once per event-loop turn (setImmediate): I/O
 * keeps being served in between, and the polling lasts less than a millisecond per timer.
 */
class PreciseTimer {
  private timeout: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private readonly deadlineNs: bigint;

  constructor(
    private readonly fn: () => void,
    delayNs: bigint,
  ) {
    this.deadlineNs = process.hrtime.bigint() + delayNs;
    const wholeMs = Number(delayNs / NS_PER_MS);
    if (wholeMs > 0) this.timeout = setTimeout(this.check, wholeMs);
    else this.immediate = setImmediate(this.check);
  }

  private readonly check = (): void => {
    this.timeout = undefined;
    if (process.hrtime.bigint() >= this.deadlineNs) {
      this.immediate = undefined;
      this.fn();
    } else {
      this.immediate = setImmediate(this.check);
    }
  };

  cancel(): void {
    clearTimeout(this.timeout);
    clearImmediate(this.immediate);
  }
}

export const systemClock: Clock = {
  nowNs: () => process.hrtime.bigint(),
  setTimeout: (fn, delayMs) => setTimeout(fn, delayMs),
  setPreciseTimeout: (fn, delayNs) => new PreciseTimer(fn, delayNs),
  clearTimeout: (handle) => {
    if (handle instanceof PreciseTimer) handle.cancel();
    else clearTimeout(handle as NodeJS.Timeout);
  },
  defer: (fn) => void setImmediate(fn),
  lagNs: () => eventLoopLag.nowNs(),
};
