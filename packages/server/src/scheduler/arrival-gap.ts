/** Smoothed time between request arrivals: whether waiting for company is worth it (adaptive delay). */
export class ArrivalGap {
  private gapNs: number | undefined;
  private lastArrivalNs: bigint | undefined;

  note(arrivalNs: bigint): void {
    if (this.lastArrivalNs !== undefined) {
      const gap = Math.max(0, Number(arrivalNs - this.lastArrivalNs));
      this.gapNs = this.gapNs === undefined ? gap : 0.8 * this.gapNs + 0.2 * gap;
    }
    this.lastArrivalNs = arrivalNs;
  }

  /** The expected gap before the next arrival; undefined before two requests have arrived. */
  get expectedNs(): bigint | undefined {
    return this.gapNs === undefined ? undefined : BigInt(Math.round(this.gapNs));
  }
}
