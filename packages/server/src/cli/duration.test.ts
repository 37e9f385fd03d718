import { describe, expect, it } from 'vitest';
import { formatDurationMs, parseDurationMs } from './duration.ts';

describe('parseDurationMs', () => {
  it('reads durations with a unit', () => {
    expect(parseDurationMs('50ms', '--x')).toBe(50);
    expect(parseDurationMs('0.5s', '--x')).toBe(500);
    expect(parseDurationMs('10m', '--x')).toBe(600_000);
    expect(parseDurationMs('250us', '--x')).toBe(0.25);
  });

  it('refuses a bare number, an unknown unit and zero, naming the flag', () => {
    expect(() => parseDurationMs('50', '--latency-objective')).toThrow(
      "--latency-objective: expected a positive duration with a unit (us, ms, s, m, h) such as 50ms, 0.5s or 10m, got '50'",
    );
    expect(() => parseDurationMs('50xs', '--latency-objective')).toThrow(/got '50xs'/);
    expect(() => parseDurationMs('50constructor', '--latency-objective')).toThrow(/got '50constructor'/);
    expect(() => parseDurationMs('0ms', '--budget')).toThrow(/^--budget: /);
  });

  it('formats for reports', () => {
    expect(formatDurationMs(50)).toBe('50ms');
    expect(formatDurationMs(1500)).toBe('1.5s');
    expect(formatDurationMs(600_000)).toBe('10m');
  });
});
