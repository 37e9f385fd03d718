/** The last `size` values noted, in a ring: the arrival gap's times and the population's counts. */
export class RecentWindow<T> {
  private readonly values: T[] = [];
  private next = 0;

  constructor(private readonly size: number) {}

  note(value: T): void {
    if (this.values.length < this.size) this.values.push(value);
    else this.values[this.next] = value;
    this.next = (this.next + 1) % this.size;
  }

  /** How many values it holds (at most `size`). */
  get length(): number {
    return this.values.length;
  }

  get full(): boolean {
    return this.values.length === this.size;
  }

  /** The latest value; undefined before the first. */
  get newest(): T | undefined {
    const n = this.values.length;
    return n === 0 ? undefined : this.values[(this.next + n - 1) % n];
  }

  /** The earliest value it still holds; undefined before the first. */
  get oldest(): T | undefined {
    return this.full ? this.values[this.next] : this.values[0];
  }

  /** Every value it holds, in no particular order. */
  get all(): readonly T[] {
    return this.values;
  }
}

/**
 * The most requests a model held at once (queued and executing) over a full window of its arrivals: a
 * closed loop's population, for the adaptive delay (batch-choice.ts). When the queue holds that many,
 * nobody else comes until a batch returns (issue 44: 16 clients of the 4x2048 MLP split into two batches
 * a cycle, each paying the run's fixed cost). Undefined until the window is full, so the first requests
 * wait as before.
 */
export function populationOf(held: RecentWindow<number>): number | undefined {
  if (!held.full) return undefined;
  let most = 0;
  for (const count of held.all) if (count > most) most = count;
  return most;
}
