import { readdirSync, readFileSync } from 'node:fs';
import { TICKS_PER_SECOND } from './threads.ts';

// The scenarios' CPU readings live with the load generator, which `batchwise tune` shares.
export { cpuShare, cpuSnapshot, type CpuShare, type CpuSnapshot } from '@batchwise/client/load';

/**
 * CPU of a process together with its descendants: a server whose model instances are processes
 * of their own (the Python backend's stubs, children of the server) spends part of each request
 * there, which /proc/<pid>/stat of the server alone does not count.
 */
export interface TreeSnapshot {
  readonly root: number;
  /** utime + stime of each process of the tree, by pid (the root included). */
  readonly ticks: ReadonlyMap<number, number>;
}

export interface TreeCpu {
  /** CPU seconds of the root process alone. */
  readonly rootSeconds: number;
  /** CPU seconds of its descendants together. */
  readonly descendantSeconds: number;
  /** How many descendants were read at the end. */
  readonly descendants: number;
}

/** utime + stime of a process, in clock ticks (fields 14 and 15 of /proc/<pid>/stat); undefined once it is gone. */
function processTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at ')'.
    const after = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(after[11]) + Number(after[12]);
  } catch {
    return undefined;
  }
}

/** The parent of every process, from /proc/<pid>/stat (field 4): where the kernel has no /proc/<pid>/task/<tid>/children. */
function parents(): Map<number, number[]> {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
    } catch {
      // Gone while listed.
    }
  }
  return children;
}

/** The children of `pid`, every thread's (/proc/<pid>/task/<tid>/children); undefined where the kernel lacks that file. */
function childrenOf(pid: number): number[] | undefined {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const children: number[] = [];
  for (const tid of tids) {
    try {
      children.push(...readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' && tid === String(pid)) return undefined; // no CONFIG_PROC_CHILDREN
    }
  }
  return children;
}

/** `pid` and every process descended from it, parents before their children. */
export function processTree(pid: number): number[] {
  const tree = [pid];
  let table: Map<number, number[]> | undefined;
  for (let i = 0; i < tree.length; i++) {
    const direct = table ? undefined : childrenOf(tree[i]!);
    if (direct) tree.push(...direct);
    else tree.push(...((table ??= parents()).get(tree[i]!) ?? []));
  }
  return tree;
}

/** The CPU ticks of `pid` and of each of its descendants now; undefined off Linux or once `pid` is gone. */
export function treeSnapshot(pid: number): TreeSnapshot | undefined {
  try {
    const ticks = new Map<number, number>();
    for (const p of processTree(pid)) {
      const t = processTicks(p);
      if (t !== undefined) ticks.set(p, t);
    }
    return ticks.has(pid) ? { root: pid, ticks } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The CPU a tree used between two snapshots: each process read at the end, less what it had used
 * at the start (nothing for one started since). A descendant that ended in between is not counted:
 * what it used after the first snapshot is lost (its parent's cutime counts it only once reaped).
 */
export function treeCpu(before: TreeSnapshot | undefined, after: TreeSnapshot | undefined): TreeCpu | undefined {
  if (!before || !after || before.root !== after.root) return undefined;
  let root = 0;
  let descendants = 0;
  for (const [pid, ticks] of after.ticks) {
    const used = ticks - (before.ticks.get(pid) ?? 0);
    if (pid === after.root) root = used;
    else descendants += used;
  }
  return { rootSeconds: root / TICKS_PER_SECOND, descendantSeconds: descendants / TICKS_PER_SECOND, descendants: after.ticks.size - 1 };
}
