import { measure, type Load, type LoadResult, type WindowOptions } from '@batchwise/client/load';
import { cpuShare, cpuSnapshot, treeCpu, treeSnapshot } from './cpu-usage.ts';
import { threadGroupCores, threadSnapshot, TICKS_PER_SECOND, type ThreadGroup, type ThreadGroupCpu, type ThreadRoles } from './threads.ts';
import { sendOk, type LeanHttpClient } from './lean-http.ts';
import { breakdown, readStats, type ServerBreakdown } from './server-stats.ts';

/** One measurement with the lean client, and what the machine did over its windows. */
export interface LeanReading {
  /** `measure`'s result: throughput and latency are of the 200 answers only; every other status is an error. */
  readonly client: LoadResult;
  /** How long the measured windows lasted. */
  readonly windowSeconds: number;
  /** Answers per second of each status over the measured windows. */
  readonly statusPerSecond: Record<number, number>;
  /** Cores' worth of CPU of the bench process (the client; process.cpuUsage, every thread of it). */
  readonly clientCores: number;
  /**
   * CPU time of the server process over the windows (/proc/<pid>/stat, every thread of it), and of
   * its descendant processes too when the probe asked for them (`descendants`).
   */
  readonly serverCpuSeconds?: number;
  /** Of serverCpuSeconds, what the server's descendant processes used (e.g. the Python backend's stubs), when asked for. */
  readonly descendantCpuSeconds?: number;
  /** How many descendant processes the server had at the end of the windows, when asked for. */
  readonly descendants?: number;
  /** The same in cores' worth. */
  readonly serverCores?: number;
  /** Cores' worth of CPU of every other process on the machine (the server's descendants not among them when counted). */
  readonly otherCores?: number;
  /** The server's CPU time per answer of any status (ms), its descendants' included when counted. */
  readonly serverCpuMsPerAnswer?: number;
  /** The server's statistics over the windows, for the model given. */
  readonly server?: ServerBreakdown;
  /** The server's CPU by thread group, when its threads were classified. */
  readonly threads?: Record<ThreadGroup, ThreadGroupCpu>;
}

export interface LeanProbe {
  /** The server process (or the echo) whose CPU is read. */
  readonly pid: number;
  /** Its statistics for this model, read as the windows start and end. */
  readonly stats?: { readonly httpUrl: string; readonly model: string };
  /** Its threads (classifyThreads), to read the CPU per group. */
  readonly threads?: ThreadRoles;
  /** Count the CPU of the process's descendants as the server's (model instances in processes of their own). */
  readonly descendants?: boolean;
}

/**
 * `measure` (@batchwise/client/load: warm-up, windows until stable) driven by a LeanHttpClient,
 * reading the answers per status, the client's CPU, the server's and everything else's exactly
 * over the measured windows.
 */
export async function measureLean(
  label: string,
  client: LeanHttpClient,
  load: Load,
  windows: WindowOptions,
  probe: LeanProbe,
): Promise<LeanReading> {
  let from = 0;
  let statusesBefore: Map<number, number> = new Map();
  let clientBefore: NodeJS.CpuUsage | undefined;
  let clientCpu: NodeJS.CpuUsage | undefined;
  let cpuBefore: ReturnType<typeof cpuSnapshot>;
  let cpuAfter: ReturnType<typeof cpuSnapshot>;
  let treeBefore: ReturnType<typeof treeSnapshot>;
  let treeAfter: ReturnType<typeof treeSnapshot>;
  let threadsBefore: ReturnType<typeof threadSnapshot>;
  let threadsAfter: ReturnType<typeof threadSnapshot>;
  let statsBefore: Awaited<ReturnType<typeof readStats>> | undefined;
  let server: ServerBreakdown | undefined;
  let elapsedMs = 0;
  let statusDelta: Record<number, number> = {};
  const pids = [process.pid, probe.pid];
  const result = await measure(label, sendOk(client), load, windows, {
    onMeasureStart: async () => {
      if (probe.stats) statsBefore = await readStats(probe.stats.httpUrl, probe.stats.model);
      cpuBefore = cpuSnapshot(pids);
      if (probe.descendants) treeBefore = treeSnapshot(probe.pid);
      if (probe.threads) threadsBefore = threadSnapshot(probe.pid);
      clientBefore = process.cpuUsage();
      statusesBefore = new Map(client.statuses);
      from = performance.now();
    },
    onMeasureEnd: async () => {
      elapsedMs = performance.now() - from;
      statusDelta = Object.fromEntries([...client.statuses].map(([s, n]) => [s, n - (statusesBefore.get(s) ?? 0)]));
      clientCpu = process.cpuUsage(clientBefore);
      if (probe.threads) threadsAfter = threadSnapshot(probe.pid);
      cpuAfter = cpuSnapshot(pids);
      if (probe.descendants) treeAfter = treeSnapshot(probe.pid);
      if (probe.stats && statsBefore) server = breakdown(statsBefore, await readStats(probe.stats.httpUrl, probe.stats.model));
    },
  });
  const seconds = elapsedMs / 1000;
  const cpu = cpuShare(cpuBefore, cpuAfter);
  const answers = Object.values(statusDelta).reduce((a, b) => a + b, 0);
  // From the ticks rather than cpuShare's rounded cores: at one client the server uses a few tenths of a core.
  const ownCpuSeconds = cpuBefore && cpuAfter ? (cpuAfter.pidTicks[1]! - cpuBefore.pidTicks[1]!) / TICKS_PER_SECOND : undefined;
  const tree = probe.descendants ? treeCpu(treeBefore, treeAfter) : undefined;
  // Asked for descendants and could not read them: no server CPU rather than a part of it.
  const serverCpuSeconds =
    ownCpuSeconds === undefined || (probe.descendants && !tree) ? undefined : ownCpuSeconds + (tree?.descendantSeconds ?? 0);
  // cpuShare counted the descendants as other processes.
  const otherCores = cpu && Math.max(0, cpu.otherCores - (tree ? tree.descendantSeconds / seconds : 0));
  const serverCores = serverCpuSeconds === undefined ? undefined : serverCpuSeconds / seconds;
  const threads = probe.threads && threadGroupCores(probe.threads, threadsBefore, threadsAfter);
  return {
    client: result,
    windowSeconds: seconds,
    statusPerSecond: Object.fromEntries(Object.entries(statusDelta).map(([s, n]) => [s, n / seconds])),
    clientCores: clientCpu ? (clientCpu.user + clientCpu.system) / 1000 / elapsedMs : 0,
    ...(serverCpuSeconds !== undefined && { serverCpuSeconds, serverCores }),
    ...(tree && { descendantCpuSeconds: tree.descendantSeconds, descendants: tree.descendants }),
    ...(otherCores !== undefined && { otherCores: Math.round(otherCores * 100) / 100 }),
    ...(serverCores !== undefined && answers > 0 && { serverCpuMsPerAnswer: (serverCpuSeconds! * 1000) / answers }),
    ...(server && { server }),
    ...(threads && { threads }),
  };
}
