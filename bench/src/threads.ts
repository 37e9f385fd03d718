import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU per thread of a server process, grouped by what the thread does: the main thread (the
 * event loop: HTTP, decoding, batching, encoding), the model instances' worker threads (each a
 * Node worker with its own event loop; an ONNX worker calls `session.run` on it), the threads
 * started after the first of them that wait on futexes (ONNX Runtime's intra-op pools, created
 * with the sessions) and the rest (V8's platform threads for GC and compilation, libuv's pool,
 * event loops that did nothing for the model). Node names every thread `node`, so the groups are
 * told apart by what each thread waits in while the server is idle (an event loop in epoll_wait,
 * a pool thread on a futex: /proc/<pid>/task/<tid>/syscall), by which event loops work while
 * the model is loaded, and by creation order (thread ids).
 */
export interface ThreadRoles {
  readonly main: number;
  /** The event loops (other than main) that worked while the model was loaded: its instances' workers. */
  readonly workers: readonly number[];
  /** Every event loop but main's (waiting in epoll while the server was idle). */
  readonly loops: readonly number[];
}

/** `ort pool`: the pool threads started after the first worker (ONNX Runtime's intra-op pools). */
export type ThreadGroup = 'main' | 'workers' | 'ort pool' | 'other';
export const THREAD_GROUPS: readonly ThreadGroup[] = ['main', 'workers', 'ort pool', 'other'];

export interface ThreadSnapshot {
  readonly atMs: number;
  readonly ticks: ReadonlyMap<number, number>;
}

/** epoll_wait, epoll_pwait, epoll_pwait2 on x86-64; epoll_pwait, epoll_pwait2 on arm64. */
const EPOLL_SYSCALLS = process.arch === 'arm64' ? [22, 441] : [232, 281, 441];

/**
 * Classifies the threads of `pid`: call it while the server is idle, with `load` a short load
 * on its model (a few hundred milliseconds: enough for its worker to use a clock tick of CPU).
 * The workers are the event loops other than main that were waiting while idle and worked
 * during `load` (Node's own delayed-task thread, and any other worker the server runs, do not).
 * Undefined off Linux, or when no event loop worked.
 */
export async function classifyThreads(pid: number, load: () => Promise<void>, attempts = 3): Promise<ThreadRoles | undefined> {
  // On a busy machine a short load may leave the worker under a clock tick, or catch it out of
  // epoll_wait when the idle threads are read: a few tries before giving up.
  for (let attempt = 0; attempt < attempts; attempt++) {
    const roles = await classifyOnce(pid, load);
    if (roles) return roles;
  }
  return undefined;
}

async function classifyOnce(pid: number, load: () => Promise<void>): Promise<ThreadRoles | undefined> {
  let loops: number[];
  try {
    loops = tids(pid).filter(
      (tid) => tid !== pid && EPOLL_SYSCALLS.includes(Number(readFileSync(`/proc/${pid}/task/${tid}/syscall`, 'utf8').split(' ')[0])),
    );
  } catch {
    return undefined;
  }
  const before = threadSnapshot(pid);
  await load();
  const after = threadSnapshot(pid);
  if (!before || !after) return undefined;
  const workers = loops.filter((tid) => (after.ticks.get(tid) ?? 0) > (before.ticks.get(tid) ?? 0));
  return workers.length > 0 ? { main: pid, workers, loops } : undefined;
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
      tid === roles.main
        ? 'main'
        : roles.workers.includes(tid)
          ? 'workers'
          : tid > firstWorker && !roles.loops.includes(tid)
            ? 'ort pool'
            : 'other';
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
