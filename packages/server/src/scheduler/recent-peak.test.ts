import { describe, expect, it } from 'vitest';
import { RecentPeak } from './recent-peak.ts';

describe('RecentPeak', () => {
  it('is unknown until 32 arrivals, then the most of the last 32', () => {
    const peak = new RecentPeak();
    for (let i = 0; i < 31; i++) peak.note(i % 8);
    expect(peak.peak).toBeUndefined();
    peak.note(15);
    expect(peak.peak).toBe(15);
    // A pool that shrinks is forgotten once a whole window of arrivals saw no more than 8.
    for (let i = 0; i < 31; i++) peak.note(8);
    expect(peak.peak).toBe(15);
    peak.note(8);
    expect(peak.peak).toBe(8);
  });
});
