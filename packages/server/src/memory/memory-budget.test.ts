import { describe, expect, it } from 'vitest';
import { cgroupMemoryLimitBytes, resolveMemoryBudgetBytes } from './memory-budget.ts';

const GiB = 1024 ** 3;

describe('memory budget', () => {
  it('reads cgroup v2, then v1, and ignores "no limit"', () => {
    expect(cgroupMemoryLimitBytes((p) => (p.endsWith('memory.max') ? '4294967296\n' : undefined))).toBe(4 * GiB);
    expect(cgroupMemoryLimitBytes((p) => (p.endsWith('memory.max') ? 'max\n' : undefined))).toBeUndefined();
    expect(cgroupMemoryLimitBytes((p) => (p.endsWith('limit_in_bytes') ? '2147483648' : undefined))).toBe(2 * GiB);
    expect(cgroupMemoryLimitBytes((p) => (p.endsWith('limit_in_bytes') ? '9223372036854771712' : undefined))).toBeUndefined();
  });

  it('defaults to a safe fraction of the container limit, else of physical memory', () => {
    expect(resolveMemoryBudgetBytes(undefined, { cgroupBytes: 10 * GiB, physicalBytes: 64 * GiB })).toBe(Math.floor(8 * GiB));
    expect(resolveMemoryBudgetBytes(undefined, { cgroupBytes: undefined, physicalBytes: 10 * GiB })).toBe(Math.floor(8 * GiB));
  });

  it('takes bytes, units and fractions', () => {
    const limits = { cgroupBytes: 16 * GiB, physicalBytes: 64 * GiB };
    expect(resolveMemoryBudgetBytes('12776898560', limits)).toBe(12776898560);
    expect(resolveMemoryBudgetBytes('12G', limits)).toBe(12 * GiB);
    expect(resolveMemoryBudgetBytes('512Mi', limits)).toBe(512 * 1024 ** 2);
    expect(resolveMemoryBudgetBytes('2GB', limits)).toBe(2 * GiB);
    expect(resolveMemoryBudgetBytes('0.5', limits)).toBe(8 * GiB);
    expect(() => resolveMemoryBudgetBytes('lots', limits)).toThrow(/--memory-limit/);
  });
});
