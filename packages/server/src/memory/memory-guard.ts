import { Errors } from '../core/errors.ts';
import type { ServerMetrics } from '../metrics/server-metrics.ts';

/** Bytes held for one request: grown as its charge becomes known, returned once when it ends. */
export interface MemoryReservation {
  /** Bytes charged now. */
  readonly bytes: number;
  /** Charges `bytes` more (spending the advance first), or throws the over-budget error and charges nothing. After release it charges nothing. */
  grow(bytes: number): void;
  /** Returns everything charged; later calls do nothing. */
  release(): void;
}

/**
 * Admission control against the server's memory budget, before the kernel's OOM killer acts.
 *
 * Requests are admitted on ACCOUNTED bytes: what admitted requests hold (bodies, queued and
 * batched tensors, outputs and replies, estimated by request-charge.ts) must fit in the budget
 * less a stable baseline (the process at rest plus the models' footprints). Resident memory
 * is not used for admission: after a burst the allocator keeps memory that requests freed (RSS
 * rarely shrinks), and that memory is reused by the next requests, so an RSS test would refuse
 * everything for minutes while nothing is held. RSS stays a gauge (nv_cpu_memory_used_bytes).
 */
export class MemoryGuard {
  /** Bytes charged to requests in flight. */
  private accounted = 0;
  /** The process at rest without models: runtime, code, and (once settled) what model estimates miss. */
  private processBytes: number;
  /** Held outside requests: estimated footprints of the model instances loaded (model-footprint.ts), the response cache. */
  private modelBytes = 0;

  constructor(
    readonly budgetBytes: number,
    private readonly metrics: ServerMetrics,
    private readonly rss: () => number = () => process.memoryUsage.rss(),
  ) {
    if (!(budgetBytes > 0)) throw new Error(`the memory budget must be more than 0 bytes, got ${budgetBytes}`);
    this.processBytes = rss();
    metrics.memoryBudgetBytes.set(budgetBytes);
    metrics.memoryAccountedBytes.set(0);
    this.publishBaseline();
  }

  /** Memory not available to requests: the process at rest and the models loaded, bytes. */
  get baselineBytes(): number {
    return this.processBytes + this.modelBytes;
  }

  get accountedBytes(): number {
    return this.accounted;
  }

  /**
   * Measures the baseline once, when start-up loading is done and before traffic: what the
   * process holds beyond the models' estimates (ONNX Runtime's libraries, worker threads,
   * arenas) is counted from then on. Never re-measured later, for the reason in the class
   * comment. Returns the resident memory measured.
   */
  settle(): number {
    const rss = this.rss();
    this.processBytes = Math.max(this.processBytes, rss - this.modelBytes);
    this.publishBaseline();
    return rss;
  }

  /** Counts memory held outside requests (a model instance, the response cache) in the baseline until the returned function is called. */
  holdAtRest(bytes: number): () => void {
    this.modelBytes += bytes;
    this.publishBaseline();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.modelBytes -= bytes;
      this.publishBaseline();
    };
  }

  /** Budget held neither by the baseline nor by requests in flight, bytes (a model load must fit in it). */
  freeBytes(): number {
    return this.budgetBytes - this.baselineBytes - this.accounted;
  }

  /**
   * Charges `bytes` for a request, plus `advanceBytes` that its later grow() calls spend before
   * charging more, or throws the over-budget error; the caller must release it.
   */
  reserve(bytes: number, advanceBytes = 0): MemoryReservation {
    this.charge(bytes + advanceBytes);
    let held = bytes + advanceBytes;
    let advance = advanceBytes;
    let released = false;
    return {
      get bytes() {
        return held;
      },
      grow: (more: number) => {
        if (released || more <= 0) return;
        const spent = Math.min(advance, more);
        if (more > spent) this.charge(more - spent);
        advance -= spent;
        held += more - spent;
      },
      release: () => {
        if (released) return;
        released = true;
        this.accounted -= held;
        this.metrics.memoryAccountedBytes.set(this.accounted);
      },
    };
  }

  private charge(bytes: number): void {
    if (this.accounted + bytes > this.budgetBytes - this.baselineBytes) throw this.overBudget(bytes);
    this.accounted += bytes;
    this.metrics.memoryAccountedBytes.set(this.accounted);
  }

  private publishBaseline(): void {
    this.metrics.memoryBaselineBytes.set(this.baselineBytes);
  }

  private overBudget(bytes: number): Error {
    this.metrics.memoryRejections.inc();
    return Errors.unavailable(
      `server is over its memory budget: admitting this request (${bytes} more bytes) would exceed --memory-limit ` +
        `${this.budgetBytes} bytes (models and process at rest ${this.baselineBytes}, held by requests in flight ${this.accounted}); retry later`,
    );
  }
}
