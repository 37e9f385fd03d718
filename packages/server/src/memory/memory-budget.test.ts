import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cgroupMemoryLimitBytes, resolveMemoryBudgetBytes } from './memory-budget.ts';

const GiB = 1024 ** 3;

describe('memory budget', () => {
  const fixture = (files: Record<string, string>) => {
    const root = mkdtempSync(join(tmpdir(), 'batchwise-cgroup-'));
    roots.push(root);
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(join(root, dirname(path)), { recursive: true });
      writeFileSync(join(root, path), text);
    }
    return root;
  };
  const roots: string[] = [];
  afterAll(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));

  it('reads cgroup v2 at the root (private namespace), then v1, and ignores "no limit"', () => {
    expect(cgroupMemoryLimitBytes(fixture({ 'proc/self/cgroup': '0::/\n', 'sys/fs/cgroup/memory.max': '4294967296\n' }))).toBe(4 * GiB);
    expect(cgroupMemoryLimitBytes(fixture({ 'proc/self/cgroup': '0::/\n', 'sys/fs/cgroup/memory.max': 'max\n' }))).toBeUndefined();
    expect(
      cgroupMemoryLimitBytes(fixture({ 'proc/self/cgroup': '4:memory:/\n', 'sys/fs/cgroup/memory/memory.limit_in_bytes': '2147483648' })),
    ).toBe(2 * GiB);
    expect(
      cgroupMemoryLimitBytes(
        fixture({ 'proc/self/cgroup': '4:memory:/\n', 'sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712' }),
      ),
    ).toBeUndefined();
    expect(cgroupMemoryLimitBytes(fixture({}))).toBeUndefined();
  });

  it('follows the cgroup path of /proc/self/cgroup and takes the tightest limit up to the root', () => {
    const v2 = fixture({
      'proc/self/cgroup': '0::/ecs/task-1/container-a\n',
      'sys/fs/cgroup/memory.max': 'max\n',
      'sys/fs/cgroup/ecs/task-1/memory.max': '3221225472\n',
      'sys/fs/cgroup/ecs/task-1/container-a/memory.max': 'max\n',
    });
    expect(cgroupMemoryLimitBytes(v2)).toBe(3 * GiB);
    const v1 = fixture({
      'proc/self/cgroup': '12:pids:/docker/abc\n7:cpuset:/docker/abc\n4:memory:/docker/abc\n',
      'sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712',
      'sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes': '1073741824',
    });
    expect(cgroupMemoryLimitBytes(v1)).toBe(GiB);
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
    expect(() => resolveMemoryBudgetBytes('0', limits)).toThrow(/more than 0 bytes/);
    expect(() => resolveMemoryBudgetBytes('0.0', limits)).toThrow(/more than 0 bytes/);
  });
});
