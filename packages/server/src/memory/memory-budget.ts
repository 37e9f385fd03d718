import { readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { totalmem } from 'node:os';

/** Share of the container (or machine) memory the server allows itself by default. */
export const DEFAULT_MEMORY_FRACTION = 0.8;

/**
 * The memory limit of this process's cgroup, or undefined outside a limited container. Reads
 * the cgroup path from /proc/self/cgroup (v2: `0::<path>`, v1: `<n>:memory:<path>`) and takes
 * the tightest limit from that cgroup up to the root, since a limit set on a parent binds its
 * children; when the path is not visible (a private cgroup namespace mounts the own cgroup at
 * the root) the root's file is what counts. `root` is the file system root (tests use a folder).
 */
export function cgroupMemoryLimitBytes(root = '/'): number | undefined {
  const read = (path: string) => readText(join(root, path))?.trim();
  const membership = read('proc/self/cgroup') ?? '';
  const v2Path = /^0::(\/.*)$/m.exec(membership)?.[1];
  const v1Path = /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(\/.*)$/m.exec(membership)?.[1];
  const v2 = tightest(read, 'sys/fs/cgroup', v2Path ?? '/', 'memory.max');
  if (v2 !== undefined) return v2;
  return tightest(read, 'sys/fs/cgroup/memory', v1Path ?? '/', 'memory.limit_in_bytes');
}

function tightest(read: (path: string) => string | undefined, mount: string, cgroup: string, file: string): number | undefined {
  let limit: number | undefined;
  for (let dir = cgroup; ; dir = posix.dirname(dir)) {
    const n = parseLimit(read(posix.join(mount, dir, file)));
    if (n !== undefined) limit = Math.min(limit ?? Infinity, n);
    if (dir === '/' || dir === '.') return limit;
  }
}

/** A limit file's value; "max" (v2) and v1's huge page-aligned "no limit" number are no limit. */
function parseLimit(text: string | undefined): number | undefined {
  if (text === undefined || text === 'max') return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) && n > 0 && n < 2 ** 60 ? n : undefined;
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
  const bytes = byteCountOf(text);
  if (bytes === undefined) {
    throw new Error(
      `--memory-limit must be bytes (e.g. 12884901888, 12G, 512Mi) or a fraction of the container limit (e.g. 0.8), got '${flag}'`,
    );
  }
  return refuseZero(bytes, flag);
}

/**
 * A byte count as the flags take it: "12884901888", "12G", "512Mi", "64k" (units are binary, as
 * Docker's and ECS's memory settings are: 12G = 12 GiB); undefined when it is not one.
 */
export function byteCountOf(text: string): number | undefined {
  const match = /^(\d+)\s*([kmgt]i?)?b?$/i.exec(text.trim());
  if (!match) return undefined;
  const unit = (match[2] ?? '').toLowerCase()[0] ?? '';
  const power = { '': 0, k: 1, m: 2, g: 3, t: 4 }[unit] ?? 0;
  return Number(match[1]) * 1024 ** power;
}

/** A byte-count flag (`--model-memory-limit 8G`): more than 0 bytes, or an error naming the flag; undefined when not given. */
export function byteCountFlag(flag: string, value: string | undefined): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const bytes = byteCountOf(value);
  if (bytes === undefined || bytes === 0)
    throw new Error(`${flag} must be a number of bytes above 0 (e.g. 8589934592, 8G, 512Mi), got '${value}'`);
  return bytes;
}

/**
 * Heap limit of each model instance's worker thread, from the budget: a quarter of it, between
 * 64 MiB and 4 GiB. Workers keep little on their JavaScript heap (BYTES tensors as strings);
 * the limit makes a runaway one die alone instead of taking the process (V8's fatal OOM).
 */
export function workerHeapLimitBytesFor(budgetBytes: number): number {
  return Math.min(4 * 1024 ** 3, Math.max(64 * 1024 ** 2, Math.floor(budgetBytes / 4)));
}

/**
 * Default of --max-request-elements: one element per 16 bytes of the budget. A request of 32-bit
 * elements is charged at least 16 bytes an element (received, batch copy, output, binary reply;
 * request-charge.ts), so past this many it could not be admitted even alone: it is refused as too
 * large (400) rather than as over budget (503), and the per-element work one request can cause
 * (counting, decoding, JSON values) stays in proportion to the budget.
 */
export function maxRequestElementsFor(budgetBytes: number): number {
  return Math.max(1, Math.floor(budgetBytes / 16));
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
