import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { ServerMetrics } from './server-metrics.ts';

/**
 * Triton's CPU metrics (core src/metrics.cc, TRITON_ENABLE_METRICS_CPU): nv_cpu_utilization from
 * the aggregate line of /proc/stat between two polls, nv_cpu_memory_total_bytes and
 * nv_cpu_memory_used_bytes from /proc/meminfo (used = MemTotal - MemAvailable). Both files describe
 * the host: in a container, the instance's CPUs and memory, not the task's share (the memory budget,
 * batchwise_memory_budget_bytes, is the task's).
 */

/** The aggregate `cpu` line of /proc/stat, in clock ticks (guest times are already in user and nice). */
export interface CpuTimes {
  readonly user: number;
  readonly nice: number;
  readonly system: number;
  readonly idle: number;
  readonly iowait: number;
  readonly irq: number;
  readonly softirq: number;
  readonly steal: number;
}

const CPU_FIELDS = ['user', 'nice', 'system', 'idle', 'iowait', 'irq', 'softirq', 'steal'] as const;

/** The first line of /proc/stat, which must be the aggregate `cpu` line (Triton's ParseCpuInfo). */
export function parseProcStat(text: string): CpuTimes {
  const line = text.split('\n', 1)[0]!;
  if (!line.startsWith('cpu ')) throw new Error('Failed to find aggregate CPU info in /proc/stat.');
  const values = line
    .trim()
    .split(/\s+/)
    .slice(1, 1 + CPU_FIELDS.length)
    .map(Number);
  if (values.length < CPU_FIELDS.length || !values.every((v) => Number.isSafeInteger(v) && v >= 0)) {
    throw new Error('Failed to parse aggregate CPU info in /proc/stat.');
  }
  return Object.fromEntries(CPU_FIELDS.map((field, i) => [field, values[i]!])) as unknown as CpuTimes;
}

/**
 * The share of the ticks between two readings spent busy (user, nice, system, irq, softirq, steal)
 * rather than idle (idle, iowait), 0..1, as Triton's CpuUtilization; a counter that went backwards
 * counts 0. Undefined when no tick passed (Triton would divide 0 by 0).
 */
export function cpuUtilization(now: CpuTimes, before: CpuTimes): number | undefined {
  const since = (field: keyof CpuTimes) => Math.max(0, now[field] - before[field]);
  const busy = since('user') + since('nice') + since('system') + since('irq') + since('softirq') + since('steal');
  const idle = since('idle') + since('iowait');
  return busy + idle === 0 ? undefined : busy / (busy + idle);
}

export interface HostMemory {
  readonly totalBytes: number;
  /** MemTotal - MemAvailable: Triton's "used" (page cache the kernel can drop is not counted). */
  readonly usedBytes: number;
}

/** /proc/meminfo as Triton's ParseMemInfo reads it (values in kB, 1024 bytes). */
export function parseMemInfo(text: string): HostMemory {
  const kB = (name: string) => {
    const match = new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(text);
    return match ? Number(match[1]) * 1024 : undefined;
  };
  const total = kB('MemTotal');
  const available = kB('MemAvailable');
  if (total === undefined || available === undefined) throw new Error('Failed to find desired values in /proc/meminfo.');
  if (available > total) throw new Error("Available bytes shouldn't be greater than Total bytes");
  return { totalBytes: total, usedBytes: total - available };
}

/** Reads a file of /proc; a parameter so that tests can give recorded text. */
export type ProcReader = (path: '/proc/stat' | '/proc/meminfo') => Promise<string>;
const readProc: ProcReader = (path) => readFile(path, 'utf8');

/**
 * Exports the nv_cpu_* gauges and polls them every `intervalMs` (Triton: at its metrics interval),
 * once /proc/stat and /proc/meminfo read right; where they do not (not Linux), it says so once and
 * exports none, rather than zeros. Utilization is 0 until the second reading. Resolves with the stop.
 */
export async function startCpuMonitor(
  metrics: ServerMetrics,
  logger: Logger,
  intervalMs: number,
  read: ProcReader = readProc,
): Promise<() => void> {
  let last: CpuTimes;
  let memory: HostMemory;
  try {
    [last, memory] = await Promise.all([read('/proc/stat').then(parseProcStat), read('/proc/meminfo').then(parseMemInfo)]);
  } catch (error) {
    logger.info({ err: (error as Error).message }, 'CPU metrics are not exported: /proc/stat or /proc/meminfo cannot be read');
    return () => undefined;
  }
  metrics.exportCpuMetrics();
  metrics.cpuMemoryTotalBytes.set(memory.totalBytes);
  metrics.cpuMemoryUsedBytes.set(memory.usedBytes);
  let stopped = false;
  const poll = async () => {
    const [stat, meminfo] = await Promise.allSettled([read('/proc/stat').then(parseProcStat), read('/proc/meminfo').then(parseMemInfo)]);
    if (stopped) return;
    if (stat.status === 'fulfilled') {
      const utilization = cpuUtilization(stat.value, last);
      if (utilization !== undefined) metrics.cpuUtilization.set(utilization);
      last = stat.value;
    }
    if (meminfo.status === 'fulfilled') {
      metrics.cpuMemoryTotalBytes.set(meminfo.value.totalBytes);
      metrics.cpuMemoryUsedBytes.set(meminfo.value.usedBytes);
    }
  };
  const timer = setInterval(() => void poll(), intervalMs);
  timer.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
