import { getHeapSpaceStatistics } from 'node:v8';
import { Errors } from '../errors/errors.ts';
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

/** The JavaScript heap as the guard sees it, resident bytes. */
export interface HeapReading {
  /** The young generation now. */
  readonly youngBytes: number;
  /** The most the young generation grows to under a high allocation rate. */
  readonly youngLimitBytes: number;
  /** Every other space (old, code, large objects): request objects that live long land here. */
  readonly otherBytes: number;
}

/**
 * Fixed charge of every request on top of its tensors: its JavaScript objects (fastify or
 * grpc-js request, parsed header, queue entry, promises) and socket and parser buffers.
 * An estimate on the generous side: heap sampling found the server allocating about 25 KiB
 * per small HTTP request over its life (2026-11-23), not all of it held at once.
 */
export const REQUEST_OVERHEAD_BYTES = 32 * 1024;

/**
 * Buffers (ArrayBuffers outside the heap) that requests dropped are freed only when the objects
 * holding them are collected, and V8 starts that collection once external memory has grown
 * about 64 MiB past its level after the last one (its external allocation soft limit): socket
 * reads, body chunks after their concatenation and the drained bodies of refused requests pile
 * up to that much under load. Measured 2026-11-23 in the overload scenario: 25 to 92 MiB of
 * external memory against 58 MiB charged to requests.
 */
export const EXTERNAL_GARBAGE_HEADROOM_BYTES = 64 * 1024 * 1024;

/** How often the heap's growth beyond the baseline is read. */
const HEAP_SAMPLE_MS = 100;

/**
 * Admission control against the server's memory budget, before the kernel's OOM killer acts.
 *
 * Requests are admitted on ACCOUNTED bytes: what admitted requests hold (bodies, queued and
 * batched tensors, outputs and replies, estimated by request-charge.ts) must fit in the budget
 * less a stable baseline (the process at rest plus the models' footprints). Resident memory
 * is not used for admission: after a burst the allocator keeps memory that requests freed (RSS
 * rarely shrinks), and that memory is reused by the next requests, so an RSS test would refuse
 * everything for minutes while nothing is held. RSS stays a gauge (batchwise_process_resident_memory_bytes).
 *
 * What the JavaScript runtime adds under load is part of the baseline, because V8 does hand it
 * back: the young generation grows from about 1 MiB at rest to its limit (32 MiB by default on
 * 64-bit) within a second of heavy traffic, so the headroom to that limit is reserved at
 * settle(), as is EXTERNAL_GARBAGE_HEADROOM_BYTES for dropped Buffers not yet collected; the
 * other spaces' growth beyond their size at settle() (request objects promoted
 * while they wait, garbage until the next full collection) is read every 100 ms. Each request
 * is also charged REQUEST_OVERHEAD_BYTES for what it holds outside its tensors. Buffers freed
 * but not yet collected are not followed: an idle server may not collect for minutes, and
 * counting them would refuse large requests while nothing is held.
 */
export class MemoryGuard {
  /** Bytes charged to requests in flight. */
  private accounted = 0;
  /** Requests holding a reservation (those charged REQUEST_OVERHEAD_BYTES): the frontends' requests and calls between models. */
  private requests = 0;
  /** The process at rest without models: runtime, code, and (once settled) what model estimates miss. */
  private processBytes: number;
  /** Held outside requests: estimated footprints of the model instances loaded (model-footprint.ts), the response cache. */
  private modelBytes = 0;
  /** The young generation's growth still possible at settle() and uncollected Buffers, reserved from then on. */
  private runtimeHeadroomBytes = 0;
  /** The heap at settle(), and its growth beyond that at the last reading. */
  private settled: HeapReading | undefined;
  private heapGrowthBytes = 0;
  private sampler: NodeJS.Timeout | undefined;

  constructor(
    readonly budgetBytes: number,
    private readonly metrics: ServerMetrics,
    private readonly rss: () => number = () => process.memoryUsage.rss(),
    private readonly heap: () => HeapReading = readHeap,
  ) {
    if (!(budgetBytes > 0)) throw new Error(`the memory budget must be more than 0 bytes, got ${budgetBytes}`);
    this.processBytes = rss();
    metrics.memoryBudgetBytes.set(budgetBytes);
    metrics.observeMemoryAccounted(() => this.accounted);
    this.publishBaseline();
  }

  /** Memory not available to requests: the process at rest and the models loaded, bytes. */
  get baselineBytes(): number {
    return this.processBytes + this.modelBytes + this.runtimeHeadroomBytes + this.heapGrowthBytes;
  }

  get accountedBytes(): number {
    return this.accounted;
  }

  /** Requests in flight: reserved and not yet released. */
  get requestsInFlight(): number {
    return this.requests;
  }

  /**
   * Measures the baseline once, when start-up loading is done and before traffic: what the
   * process holds beyond the models' estimates (ONNX Runtime's libraries, worker threads,
   * arenas) is counted from then on. Never re-measured later, for the reason in the class
   * comment; only the JavaScript heap's growth is followed, until close(). Returns the
   * resident memory measured.
   */
  settle(): number {
    const rss = this.rss();
    this.processBytes = Math.max(this.processBytes, rss - this.modelBytes);
    const heap = this.heap();
    this.runtimeHeadroomBytes = Math.max(0, heap.youngLimitBytes - heap.youngBytes) + EXTERNAL_GARBAGE_HEADROOM_BYTES;
    this.settled = heap;
    this.heapGrowthBytes = 0;
    this.publishBaseline();
    this.sampler ??= setInterval(() => this.sampleHeap(), HEAP_SAMPLE_MS).unref();
    return rss;
  }

  /** Reads the heap's growth beyond settle() into the baseline (also run every 100 ms after settle()). */
  sampleHeap(): void {
    if (this.settled === undefined) return;
    const growth = Math.max(0, this.heap().otherBytes - this.settled.otherBytes);
    if (growth === this.heapGrowthBytes) return;
    this.heapGrowthBytes = growth;
    this.publishBaseline();
  }

  /** Stops following the heap. */
  close(): void {
    clearInterval(this.sampler);
    this.sampler = undefined;
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
   * charging more, plus `overheadBytes` (a request's: REQUEST_OVERHEAD_BYTES), or throws the over-budget error; the caller
   * must release it.
   */
  reserve(bytes: number, advanceBytes = 0, overheadBytes = REQUEST_OVERHEAD_BYTES): MemoryReservation {
    this.charge(overheadBytes + bytes + advanceBytes);
    const isRequest = overheadBytes > 0;
    if (isRequest) this.requests++;
    return new Reservation(this, overheadBytes + bytes + advanceBytes, advanceBytes, isRequest);
  }

  /** Charges `bytes` more to requests in flight, or throws the over-budget error (Reservation.grow). */
  charge(bytes: number): void {
    if (this.accounted + bytes > this.budgetBytes - this.baselineBytes) throw this.overBudget(bytes);
    this.accounted += bytes;
  }

  /** Returns `bytes` a reservation held (Reservation.release). */
  discharge(bytes: number, isRequest: boolean): void {
    this.accounted -= bytes;
    if (isRequest) this.requests--;
  }

  private publishBaseline(): void {
    this.metrics.memoryBaselineBytes.set(this.baselineBytes);
  }

  private overBudget(bytes: number): Error {
    this.metrics.memoryRejections.inc();
    return Errors.overMemoryBudget(
      `server is over its memory budget: admitting this request (${bytes} more bytes) would exceed --memory-limit ` +
        `${this.budgetBytes} bytes (models and process at rest ${this.baselineBytes}, held by requests in flight ${this.accounted}); retry later`,
    );
  }
}

/**
 * V8's default young-generation limit: two semi-spaces of --max-semi-space-size, 16 MiB each
 * on 64-bit unless the flag (in the command line or NODE_OPTIONS) says otherwise.
 */
function youngLimitBytes(): number {
  const flags = [...process.execArgv, ...(process.env['NODE_OPTIONS'] ?? '').split(/\s+/)];
  const semi = flags.map((f) => /^--max-semi-space-size=(\d+)$/.exec(f)?.[1]).findLast((v) => v !== undefined);
  return 2 * (semi !== undefined ? Number(semi) : 16) * 1024 * 1024;
}

const YOUNG_LIMIT_BYTES = youngLimitBytes();

function readHeap(): HeapReading {
  let youngBytes = 0;
  let otherBytes = 0;
  for (const space of getHeapSpaceStatistics()) {
    if (space.space_name === 'new_space' || space.space_name === 'new_large_object_space') youngBytes += space.physical_space_size;
    else otherBytes += space.physical_space_size;
  }
  return { youngBytes, youngLimitBytes: YOUNG_LIMIT_BYTES, otherBytes };
}

/** One request's charge: a class, not closures, as every request makes one. */
class Reservation implements MemoryReservation {
  private released = false;

  constructor(
    private readonly guard: MemoryGuard,
    private held: number,
    /** Charged at reserve() for grow() to spend before charging more. */
    private advance: number,
    private readonly isRequest: boolean,
  ) {}

  get bytes(): number {
    return this.held;
  }

  grow(more: number): void {
    if (this.released || more <= 0) return;
    const spent = Math.min(this.advance, more);
    if (more > spent) this.guard.charge(more - spent);
    this.advance -= spent;
    this.held += more - spent;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.guard.discharge(this.held, this.isRequest);
  }
}
