import { offAbort, onAbort } from '../protocol/abort-listeners.ts';

/**
 * Triton's `ensemble_scheduling { max_inflight_requests: N }` for one step of an ensemble: at most N
 * requests of that step in flight across all the ensemble's requests (a decoupled step's until its
 * final response), the rest waiting in arrival order. What waits is the upstream work that would
 * start the step: a decoupled step's next response is not taken while the step after it is full,
 * so what piles up between steps is bounded. A request cancelled while it waits takes a slot at
 * once, as Triton's limiter lets it through: its step then fails as cancelled and gives the slot back.
 * No wait can deadlock: a slot is held only by a step request in flight, which ends on its own.
 */
export class StepSlots {
  private inFlight = 0;
  private readonly waiting: Waiter[] = [];

  constructor(readonly max: number) {}

  /** Resolves once the step may start; `release()` must follow, once, whatever the step's outcome. */
  acquire(signal: AbortSignal | undefined): Promise<void> {
    if (this.inFlight < this.max || signal?.aborted) {
      this.inFlight++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const waiter = new Waiter(this, resolve, signal);
      this.waiting.push(waiter);
      if (signal) onAbort(signal, waiter);
    });
  }

  release(): void {
    this.inFlight--;
    while (this.inFlight < this.max && this.waiting.length > 0) this.admit(this.waiting.shift()!);
  }

  /** A waiter whose request was cancelled: through at once, out of the line. */
  cancelled(waiter: Waiter): void {
    const index = this.waiting.indexOf(waiter);
    if (index < 0) return;
    this.waiting.splice(index, 1);
    this.admit(waiter);
  }

  /** How many step requests hold a slot, and how many wait: for tests and diagnostics. */
  get counts(): { readonly inFlight: number; readonly waiting: number } {
    return { inFlight: this.inFlight, waiting: this.waiting.length };
  }

  private admit(waiter: Waiter): void {
    this.inFlight++;
    if (waiter.signal) offAbort(waiter.signal, waiter);
    waiter.resolve();
  }
}

/** One wait for a slot; its own abort listener (no closure per wait). */
class Waiter {
  constructor(
    private readonly slots: StepSlots,
    readonly resolve: () => void,
    readonly signal: AbortSignal | undefined,
  ) {}

  handleEvent(): void {
    this.slots.cancelled(this);
  }
}

/** Slots for each step of an ensemble whose config limits them; undefined when it does not (max_inflight_requests 0). */
export function stepSlotsOf<Step>(steps: readonly Step[], maxInflightRequests: number): ReadonlyMap<Step, StepSlots> | undefined {
  if (!(maxInflightRequests > 0)) return undefined;
  return new Map(steps.map((step) => [step, new StepSlots(maxInflightRequests)]));
}
