import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU per thread of a server process, grouped by what the thread does: the main thread (the
 * event loop: HTTP, decoding, batching, encoding), the model instances' worker threads (each a
 * Node worker with its own event loop; an ONNX worker calls `session.run` on it), the threads
 * started after the first worker (ONNX Runtime's intra-op pools, created with the sessions) and
 * the rest (V8's platform threads for GC and compilation, libuv's pool). Node names every thread
 * `node`, so the groups are told apart by what each thread waits in when idle (an event loop in
 * epoll_wait, a pool thread on a futex; /proc/<pid>/task/<tid>/syscall) and by creation order.
 */
export interface ThreadRoles {
  readonly main: number;
  readonly workers: readonly number[];
}

/** `ort pool`: the threads started after the first worker (ONNX Runtime's intra-op pools). */
export type ThreadGroup = 'main' | 'workers' | 'ort pool' | 'other';
export const THREAD_GROUPS: readonly ThreadGroup[] = ['main', 'workers', 'ort pool', 'other'];

export interface ThreadSnapshot {
  readonly atMs: number;
  readonly ticks: ReadonlyMap<number, number>;
}

/** epoll_wait, epoll_pwait, epoll_pwait2 on x86-64; epoll_pwait, epoll_pwait2 on arm64. */
const EPOLL_SYSCALLS = process.arch === 'arm64' ? [22, 441] : [232, 281, 441];

/**
 * Classifies the threads of `pid` while it is idle: `workers` is how many model instances (Node
 * worker threads) it runs; they are the last event-loop threads by thread id (Node's own
 * delayed-task thread, started before them, has an event loop too). Undefined off Linux or when
 * fewer event loops are waiting than expected (the server was not idle).
 */
export function classifyThreads(pid: number, workers: number): ThreadRoles | undefined {
  try {
    const loops = tids(pid).filter((tid) => {
      const syscall = Number(readFileSync(`/proc/${pid}/task/${tid}/syscall`, 'utf8').split(' ')[0]);
      return tid !== pid && EPOLL_SYSCALLS.includes(syscall);
    });
    if (loops.length < workers) return undefined;
    return { main: pid, workers: loops.slice(loops.length - workers) };
  } catch {
    return undefined;
  }
}

export function threadSnapshot(pid: number): ThreadSnapshot | undefined {
  try {
    const ticks = new Map<number, number>();
    for (const tid of tids(pid)) {
      const after = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = after.slice(after.lastIndexOf(')') + 2).split(' ');
      ticks.set(tid, Number(fields[11]) + Number(fields[12]));
    }
    return { atMs: performance.now(), ticks };
  } catch {
    return undefined;
  }
}

export interface ThreadGroupCpu {
  /** Threads of the group alive at the end. */
  readonly threads: number;
  /** Cores' worth of CPU between the snapshots. */
  readonly cores: number;
}

/** CPU per group between two snapshots (threads that ended in between are not counted). */
export function threadGroupCores(
  roles: ThreadRoles,
  before: ThreadSnapshot | undefined,
  after: ThreadSnapshot | undefined,
): Record<ThreadGroup, ThreadGroupCpu> | undefined {
  if (!before || !after || after.atMs <= before.atMs) return undefined;
  const firstWorker = Math.min(...roles.workers);
  const groups = Object.fromEntries(THREAD_GROUPS.map((g) => [g, { threads: 0, cores: 0 }])) as Record<ThreadGroup, ThreadGroupCpu>;
  const elapsedTicks = ((after.atMs - before.atMs) / 1000) * TICKS_PER_SECOND;
  for (const [tid, ticks] of after.ticks) {
    const group: ThreadGroup =
      tid === roles.main ? 'main' : roles.workers.includes(tid) ? 'workers' : tid > firstWorker ? 'ort pool' : 'other';
    const cores = (ticks - (before.ticks.get(tid) ?? 0)) / elapsedTicks;
    groups[group] = { threads: groups[group].threads + 1, cores: groups[group].cores + cores };
  }
  return groups;
}

/** USER_HZ, the unit of /proc's CPU times: 100 on every Linux this runs on. */
export const TICKS_PER_SECOND = 100;

function tids(pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`)
    .map(Number)
    .sort((a, b) => a - b);
}
