import { toInferenceServerError, type InferenceServerError } from '../errors/errors.ts';
import type { MemoryGuard, MemoryReservation } from '../memory/memory-guard.ts';
import type { StreamEvent } from '../protocol/types.ts';

export type { StreamEvent };

/**
 * A request's responses as its frontend takes them, in order. Iterating throws the request's error
 * when it was refused before reaching its model's queue (an unknown model, a bad input, the memory
 * budget): the frontend answers it as it answers a refused request. What goes wrong later (a queue
 * timeout, a failed execution, a timeout waiting for a decoupled model's final response) comes as a
 * final error event. A frontend takes the next event only once it has written the last one, so a
 * slow reader holds back the model (backpressure), not the server's memory.
 */
export type InferenceStream = AsyncIterable<StreamEvent>;

/** What a held response is charged beyond its tensors' bytes (its objects, its encoding). */
const RESPONSE_OVERHEAD_BYTES = 1024;

interface Held {
  readonly event: StreamEvent;
  readonly charge: MemoryReservation | undefined;
  readonly taken: () => void;
}

/**
 * The responses of one request not yet taken by its frontend, each charged to the memory guard until
 * taken: their number is bounded by the model's side (a JavaScript model's sender waits once
 * MAX_UNSENT_RESPONSES are not taken), and a response the budget cannot hold fails the request.
 */
export class ResponseQueue implements InferenceStream {
  private readonly held: Held[] = [];
  private done = false;
  /** The request was refused before its model's queue: iteration throws it. */
  private refusal: InferenceServerError | undefined;
  /** The frontend stopped taking (its client went away): responses are dropped as they come. */
  private abandoned = false;
  private wake: (() => void) | undefined;
  /** Set once the request reached its model's queue: a failure after it is an error event, not a refusal. */
  queued = false;
  /** Set when the request's model is decoupled: its responses come as it sends them. */
  decoupled = false;

  constructor(private readonly memory: MemoryGuard) {}

  /**
   * Holds one event until the frontend takes it; resolves then. A response is charged to the memory
   * guard while held (`charged: false` for one its request's reservation already covers); throws the
   * over-budget error at once, holding nothing, so that its sender knows before anything it sends next.
   */
  push(event: StreamEvent, charged = true): Promise<void> {
    if (this.abandoned || this.done) return Promise.resolve();
    let charge: MemoryReservation | undefined;
    if (event.kind === 'response' && charged) {
      let bytes = RESPONSE_OVERHEAD_BYTES;
      for (const output of event.response.outputs) bytes += output.data.byteLength;
      charge = this.memory.reserve(bytes, 0, 0);
    }
    return new Promise<void>((taken) => {
      this.held.push({ event, charge, taken });
      this.notify();
    });
  }

  /** The request ended after its last event. */
  end(): void {
    this.done = true;
    this.notify();
  }

  /** The request failed: before its model's queue it is refused, after it the failure is its final error event. */
  fail(error: unknown): void {
    const e = toInferenceServerError(error);
    if (this.queued) void this.push({ kind: 'error', error: e, final: true });
    else this.refusal = e;
    this.end();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<StreamEvent> {
    try {
      for (;;) {
        const next = this.held.shift();
        if (next) {
          next.charge?.release();
          next.taken();
          yield next.event;
          continue;
        }
        if (this.done) {
          if (this.refusal) throw this.refusal;
          return;
        }
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
    } finally {
      this.abandoned = true;
      for (const held of this.held.splice(0)) {
        held.charge?.release();
        held.taken();
      }
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
