/** Latency percentile (nearest rank) of sorted milliseconds. */
export function percentile(sortedMs: readonly number[], p: number): number {
  if (sortedMs.length === 0) return NaN;
  const rank = Math.min(sortedMs.length - 1, Math.max(0, Math.ceil((p / 100) * sortedMs.length) - 1));
  return sortedMs[rank]!;
}

export interface LatencySummary {
  readonly p50: number;
  readonly p90: number;
  readonly p95: number;
  readonly p99: number;
  readonly mean: number;
}

export function summarize(latenciesMs: readonly number[]): LatencySummary {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  const mean = sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length);
  return { p50: percentile(sorted, 50), p90: percentile(sorted, 90), p95: percentile(sorted, 95), p99: percentile(sorted, 99), mean };
}

/** True when the last `count` values are within `tolerance` (relative) of their mean. */
export function isStable(values: readonly number[], count: number, tolerance: number): boolean {
  if (values.length < count) return false;
  const last = values.slice(-count);
  const mean = last.reduce((a, b) => a + b, 0) / count;
  return last.every((v) => Math.abs(v - mean) <= tolerance * mean);
}
