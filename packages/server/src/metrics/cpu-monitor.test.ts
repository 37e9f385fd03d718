import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { cpuUtilization, parseMemInfo, parseProcStat, startCpuMonitor, type ProcReader } from './cpu-monitor.ts';
import { ServerMetrics } from './server-metrics.ts';

// Recorded on this project's 2-core development machine (Debian, 2026-11-28).
const STAT = `cpu  1141123 0 194323 619265 2496 0 22331 25113 0 0
cpu0 566405 0 94686 317722 409 0 10930 12633 0 0
cpu1 574718 0 99637 301542 2087 0 11400 12480 0 0
intr 1 2 3
`;
const MEMINFO = `MemTotal:       24684092 kB
MemFree:        18606752 kB
MemAvailable:   22620396 kB
Buffers:          133916 kB
Cached:          3823520 kB
HugePages_Total:       0
`;

const times = (busy: number, idle: number) => ({ user: busy, nice: 0, system: 0, idle, iowait: 0, irq: 0, softirq: 0, steal: 0 });

describe('/proc/stat and /proc/meminfo as Triton reads them', () => {
  it('takes the aggregate cpu line', () => {
    expect(parseProcStat(STAT)).toEqual({
      user: 1141123,
      nice: 0,
      system: 194323,
      idle: 619265,
      iowait: 2496,
      irq: 0,
      softirq: 22331,
      steal: 25113,
    });
  });

  it("refuses a first line that is not the aggregate, with Triton's words", () => {
    expect(() => parseProcStat('cpu0 1 2 3 4 5 6 7 8\n')).toThrow('Failed to find aggregate CPU info in /proc/stat.');
    expect(() => parseProcStat('cpu  1 2 3\n')).toThrow('Failed to parse aggregate CPU info in /proc/stat.');
  });

  it('counts user, nice, system, irq, softirq and steal as busy, idle and iowait as idle', () => {
    const before = parseProcStat(STAT);
    const after = { ...before, user: before.user + 30, steal: before.steal + 10, idle: before.idle + 50, iowait: before.iowait + 10 };
    expect(cpuUtilization(after, before)).toBeCloseTo(40 / 100, 12);
    // A counter that went backwards counts 0; no tick at all leaves the gauge as it was.
    expect(cpuUtilization(times(5, 10), times(10, 5))).toBe(0);
    expect(cpuUtilization(times(10, 5), times(10, 5))).toBeUndefined();
  });

  it('reads used memory as MemTotal - MemAvailable, in bytes', () => {
    expect(parseMemInfo(MEMINFO)).toEqual({ totalBytes: 24684092 * 1024, usedBytes: (24684092 - 22620396) * 1024 });
    expect(() => parseMemInfo('MemTotal: 10 kB\nMemFree: 5 kB\n')).toThrow('Failed to find desired values in /proc/meminfo.');
    expect(() => parseMemInfo('MemTotal: 10 kB\nMemAvailable: 11 kB\n')).toThrow("Available bytes shouldn't be greater than Total bytes");
  });
});

describe('the CPU monitor', () => {
  const logger = pino({ level: 'silent' });
  const sample = (text: string, name: string) => new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1];

  it("exports Triton's three gauges with its help texts, utilization between two polls", async () => {
    const metrics = new ServerMetrics({ processMetrics: false });
    const stats = [times(100, 100), times(175, 125)];
    let polls = 0;
    const read: ProcReader = async (path) => {
      if (path === '/proc/meminfo') return MEMINFO;
      const t = stats[Math.min(polls++, stats.length - 1)]!;
      return `cpu  ${t.user} 0 0 ${t.idle} 0 0 0 0 0 0\n`;
    };
    const stop = await startCpuMonitor(metrics, logger, 10, read);
    try {
      const first = await metrics.registry.metrics();
      expect(first).toContain('# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]\n# TYPE nv_cpu_utilization gauge');
      expect(first).toContain('# HELP nv_cpu_memory_total_bytes CPU total memory (RAM), in bytes\n# TYPE nv_cpu_memory_total_bytes gauge');
      expect(first).toContain('# HELP nv_cpu_memory_used_bytes CPU used memory (RAM), in bytes\n# TYPE nv_cpu_memory_used_bytes gauge');
      expect(sample(first, 'nv_cpu_memory_total_bytes')).toBe(String(24684092 * 1024));
      expect(sample(first, 'nv_cpu_memory_used_bytes')).toBe(String((24684092 - 22620396) * 1024));
      // 75 busy ticks of 100 between the start-up reading and the first poll.
      await expect.poll(async () => sample(await metrics.registry.metrics(), 'nv_cpu_utilization')).toBe('0.75');
    } finally {
      stop();
    }
  });

  it('exports none of them where /proc cannot be read, rather than zeros', async () => {
    const metrics = new ServerMetrics({ processMetrics: false });
    const stop = await startCpuMonitor(metrics, logger, 10, async (path) => {
      throw new Error(`ENOENT: no such file or directory, open '${path}'`);
    });
    stop();
    expect(await metrics.registry.metrics()).not.toContain('nv_cpu_');
  });

  it("reads this host's /proc when it is Linux", async ({ skip }) => {
    if (process.platform !== 'linux') skip('no /proc here');
    const metrics = new ServerMetrics({ processMetrics: false });
    const stop = await startCpuMonitor(metrics, logger, 60_000);
    stop();
    const text = await metrics.registry.metrics();
    expect(Number(sample(text, 'nv_cpu_memory_total_bytes'))).toBeGreaterThan(0);
    expect(Number(sample(text, 'nv_cpu_memory_used_bytes'))).toBeGreaterThan(0);
    expect(Number(sample(text, 'nv_cpu_memory_used_bytes'))).toBeLessThan(Number(sample(text, 'nv_cpu_memory_total_bytes')));
  });
});
