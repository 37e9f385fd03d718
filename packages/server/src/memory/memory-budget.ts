import { readFileSync } from 'node:fs';
import { totalmem } from 'node:os';

/** Share of the container (or machine) memory the server allows itself by default. */
export const DEFAULT_MEMORY_FRACTION = 0.8;

/** The memory limit of this process's cgroup (v2, then v1), or undefined outside a limited container. */
export function cgroupMemoryLimitBytes(read: (path: string) => string | undefined = readText): number | undefined {
  const v2 = read('/sys/fs/cgroup/memory.max')?.trim();
  if (v2 !== undefined && v2 !== 'max') {
    const n = Number(v2);
    if (Number.isSafeInteger(n) && n > 0) return n;
  }
  const v1 = read('/sys/fs/cgroup/memory/memory.limit_in_bytes')?.trim();
  if (v1 !== undefined) {
    const n = Number(v1);
    // cgroup v1 reports "no limit" as a huge page-aligned number.
    if (Number.isSafeInteger(n) && n > 0 && n < 2 ** 60) return n;
  }
  return undefined;
}

/**
 * Resolves `--memory-limit`: a byte count ("12776898560", "12G", "512Mi"; units are binary), a fraction of the
 * container limit ("0.8"), or nothing (DEFAULT_MEMORY_FRACTION of the container limit, or of
 * physical memory outside a container).
 */
export function resolveMemoryBudgetBytes(
  flag: string | undefined,
  limits: { cgroupBytes: number | undefined; physicalBytes: number } = {
    cgroupBytes: cgroupMemoryLimitBytes(),
    physicalBytes: totalmem(),
  },
): number {
  const base = Math.min(limits.cgroupBytes ?? Infinity, limits.physicalBytes);
  if (flag === undefined || flag.trim() === '') return Math.floor(base * DEFAULT_MEMORY_FRACTION);
  const text = flag.trim();
  const fraction = /^0?\.\d+$|^1(\.0+)?$/.exec(text);
  if (fraction) return refuseZero(Math.floor(base * Number(text)), flag);
  const match = /^(\d+)\s*([kmgt]i?)?b?$/i.exec(text);
  if (!match) {
    throw new Error(`--memory-limit must be bytes (e.g. 12884901888, 12G, 512Mi) or a fraction of the container limit (e.g. 0.8), got '${flag}'`);
  }
  // Units are binary, as Docker's and ECS's memory settings are: 12G = 12 GiB.
  const unit = (match[2] ?? '').toLowerCase()[0] ?? '';
  const power = { '': 0, k: 1, m: 2, g: 3, t: 4 }[unit] ?? 0;
  return refuseZero(Number(match[1]) * 1024 ** power, flag);
}

/**
 * Heap limit of each model instance's worker thread, from the budget: a quarter of it, between
 * 64 MiB and 4 GiB. Workers keep little on their JavaScript heap (BYTES tensors as strings);
 * the limit makes a runaway one die alone instead of taking the process (V8's fatal OOM).
 */
export function workerHeapLimitBytesFor(budgetBytes: number): number {
  return Math.min(4 * 1024 ** 3, Math.max(64 * 1024 ** 2, Math.floor(budgetBytes / 4)));
}

function refuseZero(bytes: number, flag: string): number {
  if (bytes === 0) throw new Error(`--memory-limit must be more than 0 bytes (0 would refuse every request), got '${flag}'`);
  return bytes;
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
