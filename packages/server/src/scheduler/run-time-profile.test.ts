import { describe, expect, it } from 'vitest';
import { RunTimeProfile } from './run-time-profile.ts';

const MS = 1e6;

describe('RunTimeProfile', () => {
  it('knows nothing before the first run', () => {
    const profile = new RunTimeProfile();
    expect(profile.empty).toBe(true);
    expect(profile.fit()).toBeUndefined();
    expect(profile.expectedNs(4)).toBeUndefined();
  });

  it('fits t(b) = a + c·b by least squares and answers unseen sizes from the line', () => {
    const profile = new RunTimeProfile();
    for (let i = 0; i < 10; i++) {
      profile.observe(1, 2 * MS);
      profile.observe(8, 9 * MS);
    }
    const fit = profile.fit()!;
    expect(fit.fixedNs / MS).toBeCloseTo(1, 6);
    expect(fit.perSampleNs / MS).toBeCloseTo(1, 6);
    expect(profile.expectedNs(4)! / MS).toBeCloseTo(5, 6);
    expect(fit.bySize.map((s) => s.batchSize)).toEqual([1, 8]);
  });

  it('answers a size it ran recently from that size own mean, not the line', () => {
    const profile = new RunTimeProfile();
    for (let i = 0; i < 5; i++) {
      profile.observe(1, 2 * MS);
      profile.observe(4, 3 * MS); // below the line through 1 and 8
      profile.observe(8, 9 * MS);
    }
    expect(profile.expectedNs(4)! / MS).toBeCloseTo(3, 6);
  });

  it('with one size seen, estimates larger batches proportionally and smaller ones at that size', () => {
    const profile = new RunTimeProfile();
    profile.observe(2, 4 * MS);
    expect(profile.expectedNs(1)! / MS).toBe(4);
    expect(profile.expectedNs(6)! / MS).toBe(12);
  });

  it('follows drift: after run times double, estimates follow within a few dozen runs', () => {
    const profile = new RunTimeProfile();
    for (let i = 0; i < 30; i++) {
      profile.observe(1, 2 * MS);
      profile.observe(8, 9 * MS);
    }
    for (let i = 0; i < 30; i++) {
      profile.observe(1, 4 * MS);
      profile.observe(8, 18 * MS);
    }
    expect(profile.expectedNs(1)! / MS).toBeGreaterThan(3.9);
    expect(profile.expectedNs(8)! / MS).toBeGreaterThan(17.5);
    // The line moved too: an unseen size follows.
    expect(profile.expectedNs(4)! / MS).toBeGreaterThan(9.5);
  });

  it('a size not run for a long time answers from the line, which kept following the others', () => {
    const profile = new RunTimeProfile();
    profile.observe(4, 5 * MS);
    for (let i = 0; i < 40; i++) {
      profile.observe(1, 4 * MS);
      profile.observe(8, 18 * MS);
    }
    expect(profile.expectedNs(4)! / MS).toBeCloseTo(10, 0);
  });
});
