import type { Clock } from './clock.ts';

interface Due {
  readonly atNs: bigint;
  /** Order of coming in: callbacks due at the same time run in it. */
  readonly seq: number;
  readonly fn: () => void;
}

function before(a: Due, b: Due): boolean {
  return a.atNs < b.atNs || (a.atNs === b.atNs && a.seq < b.seq);
}

/**
 * Runs callbacks at their due times, never before, on one timer for all of them: the latency
 * objective's refusals, each answered at its request's deadline (issue 44). Under overload there
 * are thousands a second. A precise timer per refusal (Clock.setPreciseTimeout) polled the
 * high-resolution clock on every turn of the event loop through its last millisecond, and with
 * refusals due every fraction of a millisecond some refusal was always in that millisecond: the
 * loop never slept (8,000 to 20,000 empty polls a second at 64 clients, 400 without an objective):
 * a main thread always runnable beside the model's threads on the cores they share.
 *
 * Here the callbacks wait in a heap by due time and one millisecond timer is armed for the
 * earliest; when it fires, every callback due by then runs, and the timer is armed again for
 * the next. A callback runs at its due time or up to about a millisecond after it (the event
 * loop's timer granularity: a timer that fires early, as Node's can, is armed again for the rest),
 * and the loop sleeps in between.
 */
export class RefusalTimer {
  private readonly heap: Due[] = [];
  private timer: unknown = undefined;
  /** The due time the timer is armed for; undefined when none is armed. */
  private armedAtNs: bigint | undefined;
  private seq = 0;

  constructor(private readonly clock: Clock) {}

  /** Callbacks waiting. */
  get size(): number {
    return this.heap.length;
  }

  /** Runs `fn` at `atNs` (the clock's nanoseconds) or, when that has passed, on the timer's next firing. */
  at(atNs: bigint, fn: () => void): void {
    this.push({ atNs, seq: this.seq++, fn });
    if (this.armedAtNs === undefined || atNs < this.armedAtNs) this.arm(atNs);
  }

  private arm(atNs: bigint): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    const delayNs = atNs - this.clock.nowNs();
    this.armedAtNs = atNs;
    this.timer = this.clock.setTimeout(this.fire, delayNs > 0n ? Number(delayNs) / 1e6 : 0);
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    this.armedAtNs = undefined;
    const nowNs = this.clock.nowNs();
    while (this.heap.length > 0 && this.heap[0]!.atNs <= nowNs) this.pop().fn();
    if (this.heap.length > 0 && this.armedAtNs === undefined) this.arm(this.heap[0]!.atNs);
  };

  private push(due: Due): void {
    const heap = this.heap;
    let i = heap.push(due) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(due, heap[parent]!)) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = due;
  }

  private pop(): Due {
    const heap = this.heap;
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child = right < heap.length && before(heap[right]!, heap[left]!) ? right : left;
      if (!before(heap[child]!, last)) break;
      heap[i] = heap[child]!;
      i = child;
    }
    heap[i] = last;
    return top;
  }
}
