import { Errors } from '../core/errors.ts';
import type { ServerMetrics } from '../metrics/server-metrics.ts';

/**
 * Admission control against the server's memory budget, before the kernel's OOM killer
 * acts. Requests are charged an estimate of what they will hold while in flight (their
 * input bytes as received, again as a batch copy, and again for outputs) and refused with
 * 503 when the charge would not fit beside the memory the process already uses at rest.
 */
export class MemoryGuard {
  /** Bytes charged to requests in flight. */
  private accounted = 0;
  /** Resident memory when nothing was in flight: models, runtime, code. */
  private baselineBytes: number;
  private baselineAtMs = 0;

  constructor(
    readonly budgetBytes: number,
    private readonly metrics: ServerMetrics,
    private readonly rss: () => number = () => process.memoryUsage.rss(),
  ) {
    this.baselineBytes = rss();
    metrics.memoryBudgetBytes.set(budgetBytes);
    metrics.memoryAccountedBytes.set(0);
  }

  static chargeFor(inputBytes: number): number {
    return inputBytes * 3;
  }

  /** Budget not used by the process now nor held by requests in flight, bytes. */
  freeBytes(): number {
    return this.budgetBytes - this.rss() - this.accounted;
  }

  /** Whether `bytes` more would fit now. */
  wouldFit(bytes: number): boolean {
    return this.accounted + bytes <= this.budgetBytes - this.baselineBytes;
  }

  /** Throws the over-budget error when `bytes` would not fit now; charges nothing. */
  assertFits(bytes: number): void {
    this.refreshBaseline();
    if (!this.wouldFit(bytes)) throw this.overBudget(bytes);
  }

  /** Charges `bytes` or throws the over-budget error; the caller must release exactly once. */
  admit(bytes: number): () => void {
    this.assertFits(bytes);
    this.accounted += bytes;
    this.metrics.memoryAccountedBytes.set(this.accounted);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.accounted -= bytes;
      this.metrics.memoryAccountedBytes.set(this.accounted);
    };
  }

  /** Re-measured when idle, at most every 100 ms: reading RSS costs a system call. */
  private refreshBaseline(): void {
    if (this.accounted !== 0) return;
    const now = Date.now();
    if (now - this.baselineAtMs >= 100) {
      this.baselineBytes = this.rss();
      this.baselineAtMs = now;
    }
  }

  private overBudget(bytes: number): Error {
    this.metrics.memoryRejections.inc();
    return Errors.unavailable(
      `server is over its memory budget: admitting this request (${bytes} bytes) would exceed --memory-limit ` +
        `${this.budgetBytes} bytes (in use at rest ${this.baselineBytes}, held by requests in flight ${this.accounted}); retry later`,
    );
  }
}
