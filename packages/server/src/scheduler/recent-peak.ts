/** Arrivals the peak spans: two returns of a closed-loop pool that arrives in one or two bursts a batch. */
const WINDOW = 32;

/**
 * The most requests a model held at once (queued and executing) at its last arrivals: a closed
 * loop's population, for the adaptive delay. When the queue holds that many, nobody else is
 * coming until a batch returns, so waiting longer for company only idles the instance (issue 44:
 * 16 clients of the 4x2048 MLP split into two batches a cycle, each paying the run's fixed cost).
 * Undefined until a whole window of arrivals has been seen, so the first requests wait as before.
 */
export class RecentPeak {
  private readonly counts: number[] = [];
  private next = 0;

  note(count: number): void {
    if (this.counts.length < WINDOW) this.counts.push(count);
    else this.counts[this.next] = count;
    this.next = (this.next + 1) % WINDOW;
  }

  get peak(): number | undefined {
    if (this.counts.length < WINDOW) return undefined;
    let most = 0;
    for (const count of this.counts) if (count > most) most = count;
    return most;
  }
}
