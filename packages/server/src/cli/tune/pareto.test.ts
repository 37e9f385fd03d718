import { describe, expect, it } from 'vitest';
import { clearlyDominated, dominates, paretoFront, recommend, scoreWithin, type OperatingPoint } from './pareto.ts';

const p = (candidate: string, concurrency: number, throughput: number, p99Ms: number): OperatingPoint => ({
  candidate,
  concurrency,
  throughput,
  p99Ms,
});
const options = { objectiveMs: 50, tieTolerance: 0.03, cost: (c: string) => Number(c.slice(1)) };

describe('dominance and the Pareto front', () => {
  it('dominates only when at least as good on both axes and better on one', () => {
    expect(dominates(p('a', 1, 100, 10), p('b', 1, 90, 10))).toBe(true);
    expect(dominates(p('a', 1, 100, 10), p('b', 1, 100, 12))).toBe(true);
    expect(dominates(p('a', 1, 100, 10), p('b', 1, 100, 10))).toBe(false);
    expect(dominates(p('a', 1, 100, 10), p('b', 1, 120, 11))).toBe(false);
  });

  it('keeps the undominated points, by rising p99', () => {
    const points = [p('a', 1, 100, 10), p('a', 4, 300, 30), p('b', 1, 90, 12), p('b', 4, 350, 40), p('c', 4, 200, 35)];
    expect(paretoFront(points)).toEqual([p('a', 1, 100, 10), p('a', 4, 300, 30), p('b', 4, 350, 40)]);
  });

  it('calls a point clearly dominated only against another candidate at the same concurrency, beyond the margin', () => {
    const others = [p('a', 4, 300, 30), p('a', 8, 1000, 5)];
    expect(clearlyDominated(p('b', 4, 250, 30), others, 0.15)).toBe(true);
    expect(clearlyDominated(p('b', 4, 270, 30), others, 0.15)).toBe(false); // within the margin
    expect(clearlyDominated(p('b', 4, 250, 29), others, 0.15)).toBe(false); // lower p99
    expect(clearlyDominated(p('b', 2, 100, 90), others, 0.15)).toBe(false); // no point at c=2
    expect(clearlyDominated(p('a', 4, 100, 90), others, 0.15)).toBe(false); // its own points do not count
  });

  it('scores a candidate by its best throughput within the objective', () => {
    expect(scoreWithin([p('a', 1, 100, 10), p('a', 4, 300, 49), p('a', 8, 500, 80)], 50)).toBe(300);
    expect(scoreWithin([p('a', 8, 500, 80)], 50)).toBe(0);
  });
});

describe('recommend', () => {
  it('picks the highest throughput within the objective, not the highest overall', () => {
    const r = recommend([p('c1', 1, 100, 10), p('c1', 8, 900, 60), p('c2', 4, 400, 45)], options)!;
    expect(r.point).toEqual(p('c2', 4, 400, 45));
    expect(r.ties).toEqual([]);
    expect(r.reason).toBe('highest throughput with p99 within 50 ms');
  });

  it('settles a throughput tie by the lower p99', () => {
    const r = recommend([p('c1', 4, 400, 40), p('c2', 4, 405, 30)], options)!;
    expect(r.point.candidate).toBe('c2');
    expect(r.ties.map((t) => t.candidate)).toEqual(['c1']);
    expect(r.reason).toMatch(/lowest p99/);
  });

  it('settles a tie on throughput and p99 by the lower resource cost', () => {
    const r = recommend([p('c4', 4, 405, 30), p('c2', 4, 400, 30.5)], options)!;
    expect(r.point.candidate).toBe('c2');
    expect(r.reason).toMatch(/fewest resources/);
  });

  it('settles a full tie by the order measured', () => {
    const r = recommend([p('c2', 4, 400, 30), p('c2x', 4, 401, 30)], { ...options, cost: () => 1 })!;
    expect(r.point.candidate).toBe('c2');
    expect(r.reason).toMatch(/measured first/);
  });

  it('marks a point within the objective as such', () => {
    expect(recommend([p('c1', 1, 100, 10)], options)!.withinObjective).toBe(true);
  });

  it('when no point meets the objective, recommends the nearest: the lowest p99, not the highest throughput', () => {
    const r = recommend([p('c1', 1, 100, 60), p('c1', 8, 900, 120), p('c2', 1, 120, 55), p('c2', 4, 400, 80)], options)!;
    expect(r.withinObjective).toBe(false);
    expect(r.point).toEqual(p('c2', 1, 120, 55));
    expect(r.ties).toEqual([]);
    expect(r.reason).toBe('no point had p99 within 50 ms; this one is the nearest, the lowest p99 measured');
  });

  it('settles a tie on the nearest p99 by the higher throughput, then by the order measured', () => {
    const r = recommend([p('c1', 1, 100, 55), p('c2', 1, 150, 56), p('c3', 1, 152, 56.5)], options)!;
    expect(r.point.candidate).toBe('c2');
    expect(r.ties.map((t) => t.candidate)).toEqual(['c1', 'c3']);
    expect(r.reason).toMatch(/2 other candidate\(s\) within 3% of that p99, this one has the highest throughput/);
  });

  it('recommends nothing without a point', () => {
    expect(recommend([], options)).toBeUndefined();
  });
});
