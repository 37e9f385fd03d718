import { describe, expect, it } from 'vitest';
import { figuresBetween, judgeCanary, p99Bucket, p99Seconds, type VersionFigures } from './canary-judge.ts';

const BOUNDS = [0.001, 0.01, 0.1, 1];
/** `success` requests all at `latencyIndex`'s bucket, and `failure` failures. */
function figures(success: number, failure: number, latencyIndex = 0): VersionFigures {
  return { success, failure, latencyBounds: BOUNDS, latencyCumulative: BOUNDS.map((_, i) => (i >= latencyIndex ? success : 0)) };
}
const thresholds = { minRequests: 20, maxErrorRateIncrease: 0.05, maxP99Ratio: 2 };

describe('judgeCanary', () => {
  it('waits until the canary had the minimum requests in the window', () => {
    expect(judgeCanary(figures(100, 0), figures(10, 9), thresholds)).toMatchObject({ kind: 'wait' });
  });

  it('rolls back a canary whose error rate exceeds the stable one by more than allowed', () => {
    const verdict = judgeCanary(figures(100, 1), figures(18, 2), thresholds);
    expect(verdict).toMatchObject({ kind: 'rollback', reason: 'error_rate' });
    expect(verdict.detail).toContain('10.00%');
  });

  it('judges errors against 0 when the stable version had no requests', () => {
    expect(judgeCanary(figures(0, 0), figures(0, 20), thresholds)).toMatchObject({ kind: 'rollback', reason: 'error_rate' });
  });

  it('keeps a canary whose error rate is within the allowed increase', () => {
    expect(judgeCanary(figures(95, 5), figures(92, 8), thresholds)).toMatchObject({ kind: 'healthy' });
  });

  it('rolls back a canary whose p99 bucket is more than the ratio above the stable one', () => {
    expect(judgeCanary(figures(100, 0, 0), figures(50, 0, 2), thresholds)).toMatchObject({ kind: 'rollback', reason: 'latency' });
    expect(judgeCanary(figures(100, 0, 1), figures(50, 0, 1), thresholds)).toMatchObject({ kind: 'healthy' });
  });

  it('does not judge latency until the stable version had the minimum successes too', () => {
    expect(judgeCanary(figures(5, 0, 0), figures(50, 0, 3), thresholds)).toMatchObject({ kind: 'healthy' });
  });
});

describe('figures', () => {
  it('p99 is the upper bound of the bucket holding the 99th percentile, Infinity above the last bound', () => {
    expect(p99Seconds({ success: 100, failure: 0, latencyBounds: BOUNDS, latencyCumulative: [98, 99, 100, 100] })).toBe(0.01);
    expect(p99Seconds({ success: 100, failure: 0, latencyBounds: BOUNDS, latencyCumulative: [0, 0, 0, 50] })).toBe(Infinity);
    expect(p99Seconds(figures(0, 0))).toBeUndefined();
    expect(p99Bucket({ success: 100, failure: 0, latencyBounds: BOUNDS, latencyCumulative: [98, 99, 100, 100] })).toEqual({
      aboveSeconds: BOUNDS[0],
      atMostSeconds: 0.01,
    });
    expect(p99Bucket({ success: 100, failure: 0, latencyBounds: BOUNDS, latencyCumulative: [99, 100, 100, 100] })!.aboveSeconds).toBe(0);
    expect(p99Bucket({ success: 100, failure: 0, latencyBounds: BOUNDS, latencyCumulative: [0, 0, 0, 50] })).toEqual({
      aboveSeconds: BOUNDS.at(-1),
      atMostSeconds: Infinity,
    });
  });

  it('figuresBetween is what happened between two readings', () => {
    expect(figuresBetween(figures(10, 1, 1), figures(30, 4, 1))).toEqual(figures(20, 3, 1));
  });
});
