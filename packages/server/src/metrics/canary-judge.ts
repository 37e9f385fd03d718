/**
 * Whether a canary version is clearly worse than the stable one, from the per-version figures
 * the server keeps (request counts and the request-latency histogram). Pure: the server's canary
 * watch and `batchwise models canary` (from scraped Prometheus text) judge the same way.
 */

/** Cumulative figures of one version: requests that succeeded or failed, and the latency histogram of the successes. */
export interface VersionFigures {
  readonly success: number;
  readonly failure: number;
  /** Histogram upper bounds, seconds, ascending (without +Inf). */
  readonly latencyBounds: readonly number[];
  /** Successes at or below each bound (cumulative, as Prometheus' `_bucket` lines). */
  readonly latencyCumulative: readonly number[];
}

export interface JudgeThresholds {
  readonly minRequests: number;
  readonly maxErrorRateIncrease: number;
  readonly maxP99Ratio: number;
}

export type CanaryRollbackReason = 'error_rate' | 'latency';

export type CanaryVerdict =
  | { readonly kind: 'wait'; readonly detail: string }
  | { readonly kind: 'healthy'; readonly detail: string }
  | { readonly kind: 'rollback'; readonly reason: CanaryRollbackReason; readonly detail: string };

export const NO_FIGURES: VersionFigures = { success: 0, failure: 0, latencyBounds: [], latencyCumulative: [] };

/** What happened between two readings of the same version's cumulative figures. */
export function figuresBetween(before: VersionFigures, after: VersionFigures): VersionFigures {
  const sameBuckets = before.latencyBounds.length === after.latencyBounds.length;
  return {
    success: Math.max(0, after.success - before.success),
    failure: Math.max(0, after.failure - before.failure),
    latencyBounds: after.latencyBounds,
    latencyCumulative: after.latencyCumulative.map((n, i) => Math.max(0, n - (sameBuckets ? (before.latencyCumulative[i] ?? 0) : 0))),
  };
}

/** The 99th percentile's bucket upper bound (seconds; Infinity above the last bound), or undefined without successes. */
export function p99Seconds(figures: VersionFigures): number | undefined {
  return p99Bucket(figures)?.atMostSeconds;
}

/**
 * The histogram bucket that holds the 99th percentile: above `aboveSeconds` (0 in the first
 * bucket), at most `atMostSeconds` (Infinity above the last bound). Undefined without successes.
 */
export function p99Bucket(figures: VersionFigures): { readonly aboveSeconds: number; readonly atMostSeconds: number } | undefined {
  if (figures.success === 0) return undefined;
  const rank = Math.ceil(0.99 * figures.success);
  const i = figures.latencyCumulative.findIndex((n) => n >= rank);
  return i < 0
    ? { aboveSeconds: figures.latencyBounds.at(-1) ?? 0, atMostSeconds: Infinity }
    : { aboveSeconds: figures.latencyBounds[i - 1] ?? 0, atMostSeconds: figures.latencyBounds[i]! };
}

export function errorRate(figures: VersionFigures): number {
  const total = figures.success + figures.failure;
  return total === 0 ? 0 : figures.failure / total;
}

/**
 * Judges the canary on figures of one window. The canary needs `minRequests` requests before it
 * is judged at all; its error rate is compared with the stable version's (0 when the stable one
 * had no requests); its p99 only once both versions had `minRequests` successes.
 */
export function judgeCanary(stable: VersionFigures, canary: VersionFigures, thresholds: JudgeThresholds): CanaryVerdict {
  const canaryRequests = canary.success + canary.failure;
  if (canaryRequests < thresholds.minRequests) {
    return { kind: 'wait', detail: `canary had ${canaryRequests} of the ${thresholds.minRequests} requests needed to judge it` };
  }
  const increase = errorRate(canary) - errorRate(stable);
  if (increase > thresholds.maxErrorRateIncrease) {
    return {
      kind: 'rollback',
      reason: 'error_rate',
      detail:
        `canary error rate ${percent(errorRate(canary))} exceeds the stable version's ${percent(errorRate(stable))} ` +
        `by more than ${percent(thresholds.maxErrorRateIncrease)} (${canary.failure} of ${canaryRequests} failed)`,
    };
  }
  if (canary.success >= thresholds.minRequests && stable.success >= thresholds.minRequests) {
    const canaryP99 = p99Seconds(canary)!;
    const stableP99 = p99Seconds(stable)!;
    if (canaryP99 > stableP99 * thresholds.maxP99Ratio) {
      return {
        kind: 'rollback',
        reason: 'latency',
        detail: `canary p99 ${seconds(canaryP99)} is more than ${thresholds.maxP99Ratio}x the stable version's ${seconds(stableP99)}`,
      };
    }
  }
  return {
    kind: 'healthy',
    detail: `canary error rate ${percent(errorRate(canary))} over ${canaryRequests} requests, p99 ${seconds(p99Seconds(canary))}`,
  };
}

function percent(rate: number): string {
  return `${(rate * 100).toFixed(2)}%`;
}

function seconds(value: number | undefined): string {
  if (value === undefined) return 'n/a';
  return value === Infinity ? '> the largest bucket' : `<= ${value * 1000} ms`;
}
