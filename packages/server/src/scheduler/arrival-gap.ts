import { RecentWindow } from './recent-window.ts';

/** Arrivals the estimate averages over: enough to span a whole burst of a closed-loop client pool. */
const WINDOW = 32;

/**
 * Mean time between a model's last request arrivals: whether waiting for company is worth
 * it (the adaptive delay). A mean over a window, not a smoothed last gap: clients that send
 * in bursts (many requests at once when a batch returns, then nothing while the next runs)
 * would otherwise read as "nobody coming" right after each burst and shrink batches at load.
 */
export class ArrivalGap {
  private readonly times = new RecentWindow<bigint>(WINDOW);

  note(arrivalNs: bigint): void {
    this.times.note(arrivalNs);
  }

  /** When the latest request arrived; undefined before the first. */
  get lastNs(): bigint | undefined {
    return this.times.newest;
  }

  /** The expected gap before the next arrival; undefined before two requests have arrived. */
  get expectedNs(): bigint | undefined {
    const n = this.times.length;
    if (n < 2) return undefined;
    const span = this.times.newest! - this.times.oldest!;
    return span > 0n ? span / BigInt(n - 1) : 0n;
  }
}
