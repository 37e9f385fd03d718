/** One measured operating point: a candidate config driven at one concurrency. */
export interface OperatingPoint {
  readonly candidate: string;
  readonly concurrency: number;
  /** Successful responses per second. */
  readonly throughput: number;
  readonly p99Ms: number;
}

/** `a` is at least as good as `b` on both axes (throughput up, p99 down) and better on one. */
export function dominates(a: OperatingPoint, b: OperatingPoint): boolean {
  return a.throughput >= b.throughput && a.p99Ms <= b.p99Ms && (a.throughput > b.throughput || a.p99Ms < b.p99Ms);
}

/** The points no other point dominates, by rising p99 (and so rising throughput). */
export function paretoFront(points: readonly OperatingPoint[]): OperatingPoint[] {
  return points
    .filter((p) => !points.some((q) => q !== p && dominates(q, p)))
    .sort((a, b) => a.p99Ms - b.p99Ms || a.throughput - b.throughput);
}

/**
 * True when another candidate's point at the same concurrency beats `point` by a clear margin:
 * at least `margin` (relative) more throughput at an equal or lower p99. Measurement noise on
 * a busy machine is a few percent, so a margin well above it keeps a close call in the sweep.
 */
export function clearlyDominated(point: OperatingPoint, others: readonly OperatingPoint[], margin: number): boolean {
  return others.some(
    (q) =>
      q.candidate !== point.candidate &&
      q.concurrency === point.concurrency &&
      q.p99Ms <= point.p99Ms &&
      q.throughput >= point.throughput * (1 + margin),
  );
}

/** The best throughput a candidate reached with p99 within the objective (0 when none did). */
export function scoreWithin(points: readonly OperatingPoint[], objectiveMs: number): number {
  return Math.max(0, ...points.filter((p) => p.p99Ms <= objectiveMs).map((p) => p.throughput));
}

export interface Recommendation {
  readonly point: OperatingPoint;
  /**
   * False when no point met the objective: `point` is then the nearest one, the lowest p99
   * measured (the highest throughput among p99s within `tieTolerance` of it).
   */
  readonly withinObjective: boolean;
  /** Other candidates' points tied with it: within `tieTolerance` of its throughput and within the objective (of its p99, when none met it). */
  readonly ties: readonly OperatingPoint[];
  /** Why this point won, in a sentence for the report. */
  readonly reason: string;
}

export interface RecommendOptions {
  readonly objectiveMs: number;
  /** Throughputs this close (relative) count as a tie: measurements differ by a few percent run to run. */
  readonly tieTolerance: number;
  /** Resource cost of a candidate (e.g. instances x threads): the cheaper of tied candidates wins. */
  readonly cost: (candidate: string) => number;
}

/**
 * The highest-throughput point whose p99 is within the objective. Throughputs within
 * `tieTolerance` of the best are a tie, settled by the lower p99 when the p99s differ by more than
 * the same tolerance, else by the lower resource cost, else by the order measured (the earlier,
 * closer to the current config, wins). When no point met the objective, the nearest (see
 * `nearest`). Undefined only without points.
 */
export function recommend(points: readonly OperatingPoint[], options: RecommendOptions): Recommendation | undefined {
  const within = points.filter((p) => p.p99Ms <= options.objectiveMs);
  if (within.length === 0) return points.length > 0 ? nearest(points, options) : undefined;
  const best = Math.max(...within.map((p) => p.throughput));
  const tied = within.filter((p) => p.throughput >= best * (1 - options.tieTolerance));
  const perCandidate = bestPerCandidate(tied);
  const lowestP99 = Math.min(...perCandidate.map((p) => p.p99Ms));
  const lowP99 = perCandidate.filter((p) => p.p99Ms <= lowestP99 * (1 + options.tieTolerance));
  const cheapest = Math.min(...lowP99.map((p) => options.cost(p.candidate)));
  const point = lowP99.find((p) => options.cost(p.candidate) === cheapest)!;
  const ties = perCandidate.filter((p) => p !== point);
  const pct = `${Math.round(options.tieTolerance * 100)}%`;
  let reason = `highest throughput with p99 within ${options.objectiveMs} ms`;
  if (ties.length > 0) {
    reason +=
      lowP99.length < perCandidate.length
        ? `; ${ties.length} other candidate(s) within ${pct} of its throughput, this one has the lowest p99`
        : lowP99.filter((p) => options.cost(p.candidate) === cheapest).length < lowP99.length
          ? `; ${ties.length} other candidate(s) within ${pct} on throughput and p99, this one uses the fewest resources (instances x threads)`
          : `; ${ties.length} other candidate(s) within ${pct} on throughput, p99 and resources, this one was measured first (closest to the current config)`;
  }
  return { point, withinObjective: true, ties, reason };
}

/** One point per candidate, its highest throughput, candidates in the order measured. */
function bestPerCandidate(points: readonly OperatingPoint[]): OperatingPoint[] {
  return [...new Map(points.map((p) => [p.candidate, p])).keys()].map(
    (c) => points.filter((p) => p.candidate === c).sort((a, b) => b.throughput - a.throughput)[0]!,
  );
}

/**
 * When no point met the objective: the one that missed it least, the lowest p99. p99s within
 * `tieTolerance` of the lowest are a tie, settled by the higher throughput (beyond the same
 * tolerance), else by the order measured.
 */
function nearest(points: readonly OperatingPoint[], options: RecommendOptions): Recommendation {
  const lowest = Math.min(...points.map((p) => p.p99Ms));
  const close = points.filter((p) => p.p99Ms <= lowest * (1 + options.tieTolerance));
  const most = Math.max(...close.map((p) => p.throughput));
  const point = close.find((p) => p.throughput >= most * (1 - options.tieTolerance))!;
  const ties = bestPerCandidate(close.filter((p) => p.candidate !== point.candidate));
  const pct = `${Math.round(options.tieTolerance * 100)}%`;
  let reason = `no point had p99 within ${options.objectiveMs} ms; this one is the nearest, the lowest p99 measured`;
  if (ties.length > 0) {
    reason += `; ${ties.length} other candidate(s) within ${pct} of that p99, this one has the highest throughput (within ${pct}: the one measured first)`;
  }
  return { point, withinObjective: false, ties, reason };
}
