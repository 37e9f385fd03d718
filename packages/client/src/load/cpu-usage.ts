import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';

/**
 * Where the CPU went during a measurement, read from Linux's /proc: the load generator's own
 * process, the server's, and everything else on the machine. A generator that shares the host
 * with the server it measures takes cores the server would have had (`batchwise tune` reports it
 * beside each measurement), and a run that had another test suite beside it is not comparable with
 * one that did not. Elsewhere than Linux every reading is undefined.
 */
export interface CpuSnapshot {
  readonly busyTicks: number;
  readonly totalTicks: number;
  readonly ownTicks: number;
  /** CPU ticks of each pid, in the order given. */
  readonly pidTicks: readonly number[];
}

export interface CpuShare {
  /** Cores' worth of CPU used by the given processes together (e.g. generator and server). */
  readonly ownCores: number;
  /** Cores' worth of CPU used by everything else: ideally near 0. */
  readonly otherCores: number;
  /** Cores' worth of CPU used by each pid, in the order given to cpuSnapshot. */
  readonly pidCores: readonly number[];
  readonly cores: number;
}

export function cpuSnapshot(pids: readonly number[]): CpuSnapshot | undefined {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal ...
    const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
    const idle = fields[3]! + fields[4]!;
    const pidTicks = pids.map((pid) => {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Fields after the command name (which may hold spaces) start at ')'.
      const after = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return Number(after[11]) + Number(after[12]); // utime, stime
    });
    return { busyTicks: total - idle, totalTicks: total, ownTicks: pidTicks.reduce((a, b) => a + b, 0), pidTicks };
  } catch {
    return undefined;
  }
}

export function cpuShare(before: CpuSnapshot | undefined, after: CpuSnapshot | undefined): CpuShare | undefined {
  if (!before || !after) return undefined;
  const cores = cpus().length;
  const total = after.totalTicks - before.totalTicks;
  if (total <= 0) return undefined;
  // /proc/stat sums every core, so total ticks / cores is the elapsed time in ticks.
  const elapsed = total / cores;
  const own = (after.ownTicks - before.ownTicks) / elapsed;
  const busy = (after.busyTicks - before.busyTicks) / elapsed;
  const pidCores = after.pidTicks.map((ticks, i) => round((ticks - (before.pidTicks[i] ?? 0)) / elapsed));
  return { ownCores: round(own), otherCores: round(Math.max(0, busy - own)), pidCores, cores };
}

function round(v: number): number {
  return Math.round(v * 100) / 100;
}
