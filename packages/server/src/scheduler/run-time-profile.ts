/**
 * Weight each earlier run keeps when a new one is observed: the profile follows drift (a
 * noisy neighbour, thermal throttling, a GPU clock change) within a few dozen runs, while
 * one slow run moves it by 10%.
 */
const DECAY = 0.9;

/** A size's own mean answers for it while the size ran within this many runs; older means may have drifted. */
const FRESH_RUNS = 32;

/** The fitted run time of one instance, as statistics and metrics show it. */
export interface ProfileFit {
  /** t(b) = fixedNs + perSampleNs * b, weighted least squares over recent runs. */
  readonly fixedNs: number;
  readonly perSampleNs: number;
  /** Recent run time by batch size (exponentially weighted mean), ascending by size. */
  readonly bySize: readonly { readonly batchSize: number; readonly ns: number }[];
}

/**
 * Online profile of one instance's run time (dispatch to completion) by batch size. Two views,
 * both decayed so recent runs weigh more: a linear fit t(b) = a + c·b over every run, and a
 * mean per batch size seen. A size seen in the last FRESH_RUNS runs answers from its own mean; any other from the
 * fit. With a single size seen the fit has no slope, and the estimate is the proportional one
 * above it (t(b0)·b/b0) and t(b0) below it: both at least the truth for a run time that grows
 * with b and has a fixed part, so the batcher errs on the side of the objective.
 */
export class RunTimeProfile {
  // Decayed sums of weight, b, t, b², b·t.
  private w = 0;
  private sb = 0;
  private st = 0;
  private sbb = 0;
  private sbt = 0;
  private runs = 0;
  /** fit() until the next run: the batcher asks for many sizes per decision. */
  private fitted: ProfileFit | undefined;
  /** Mean run time per batch size, and the run count when that size last ran. */
  private readonly sizes = new Map<number, { ns: number; lastRun: number }>();

  get empty(): boolean {
    return this.w === 0;
  }

  observe(batchSize: number, ns: number): void {
    this.fitted = undefined;
    this.w = this.w * DECAY + 1;
    this.sb = this.sb * DECAY + batchSize;
    this.st = this.st * DECAY + ns;
    this.sbb = this.sbb * DECAY + batchSize * batchSize;
    this.sbt = this.sbt * DECAY + batchSize * ns;
    this.runs++;
    const previous = this.sizes.get(batchSize);
    const mean = previous === undefined ? ns : previous.ns * DECAY + ns * (1 - DECAY);
    this.sizes.set(batchSize, { ns: mean, lastRun: this.runs });
  }

  /** The fitted line; undefined before the first run. */
  fit(): ProfileFit | undefined {
    if (this.w === 0) return undefined;
    return (this.fitted ??= this.computeFit());
  }

  private computeFit(): ProfileFit {
    const bySize = [...this.sizes].sort((a, b) => a[0] - b[0]).map(([batchSize, { ns }]) => ({ batchSize, ns }));
    const denominator = this.w * this.sbb - this.sb * this.sb;
    // Relative test: the sums are large numbers, and one size alone leaves only rounding here.
    if (denominator <= 1e-9 * this.w * this.sbb) return { fixedNs: 0, perSampleNs: this.st / this.sb, bySize };
    let perSampleNs = (this.w * this.sbt - this.sb * this.st) / denominator;
    let fixedNs = (this.st - perSampleNs * this.sb) / this.w;
    if (perSampleNs < 0) [perSampleNs, fixedNs] = [0, this.st / this.w];
    else if (fixedNs < 0) [perSampleNs, fixedNs] = [this.sbt / this.sbb, 0];
    return { fixedNs, perSampleNs, bySize };
  }

  /** Expected run time of a batch of `batchSize` samples; undefined before the first run. */
  expectedNs(batchSize: number): number | undefined {
    const own = this.sizes.get(batchSize);
    if (own !== undefined && this.runs - own.lastRun < FRESH_RUNS) return own.ns;
    const fit = this.fit();
    if (!fit) return undefined;
    if (this.sizes.size === 1) {
      const [[b0, { ns: t0 }]] = [...this.sizes];
      return batchSize < b0! ? t0 : (t0 * batchSize) / b0!;
    }
    return fit.fixedNs + fit.perSampleNs * batchSize;
  }
}
