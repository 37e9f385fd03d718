import { describe, expect, it } from 'vitest';
import { ArrivalGap } from './arrival-gap.ts';

const MS = 1_000_000n;

describe('ArrivalGap', () => {
  it('knows nothing before two arrivals', () => {
    const gap = new ArrivalGap();
    expect(gap.expectedNs).toBeUndefined();
    gap.note(5n * MS);
    expect(gap.expectedNs).toBeUndefined();
    gap.note(7n * MS);
    expect(gap.expectedNs).toBe(2n * MS);
  });

  it('reads bursts by their rate: right after a pause the next request is still expected soon', () => {
    const gap = new ArrivalGap();
    // Bursts of 8 at once every 4 ms, as a closed-loop pool gets its batch back.
    for (let burst = 0; burst < 4; burst++) for (let i = 0; i < 8; i++) gap.note(BigInt(burst) * 4n * MS);
    gap.note(16n * MS); // the first of the next burst, after a 4 ms pause
    expect(gap.expectedNs! < MS).toBe(true);
  });

  it('forgets an idle spell once the window has moved past it', () => {
    const gap = new ArrivalGap();
    gap.note(0n);
    gap.note(10_000n * MS);
    expect(gap.expectedNs).toBe(10_000n * MS);
    for (let i = 1; i <= 32; i++) gap.note(10_000n * MS + BigInt(i) * (MS / 10n));
    expect(gap.expectedNs).toBe(MS / 10n);
  });
});
