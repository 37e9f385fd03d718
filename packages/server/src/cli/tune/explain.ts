import { formatDurationMs } from '../duration.ts';
import type { CandidateRun, LevelResult } from './run-candidate.ts';

/** Fixed decimals for reports; '-' for what was not measured. */
export const fixed1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : '-');
export const fixed2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '-');

/**
 * The host counts as saturated when the generator, the server and everything else together used
 * this share of its cores: past it, a request waits for a core as well as for the server.
 */
export const SATURATED_SHARE = 0.9;

/** `... of N cores` in use over a level's windows, or undefined where /proc could not be read. */
function busyCores(level: LevelResult): number | undefined {
  return level.cpu && level.cpu.generatorCores + level.cpu.serverCores + level.cpu.otherCores;
}

function saturated(level: LevelResult): boolean {
  const busy = busyCores(level);
  return busy !== undefined && busy >= SATURATED_SHARE * level.cpu!.cores;
}

/** The server's p99 as its histogram bucket tells it: `at most 0.1`, `5-10`, `above 30000` (ms), or '-'. */
export function serverP99(level: LevelResult): string {
  const bucket = level.server?.p99BucketMs;
  if (!bucket) return '-';
  if (bucket.atMostMs === undefined) return `above ${bucket.aboveMs}`;
  return bucket.aboveMs === 0 ? `at most ${bucket.atMostMs}` : `${bucket.aboveMs}-${bucket.atMostMs}`;
}

/** The server's part of a level: `1.20 ms per request (of which queue 0.10, compute 0.95), p99 1-2.5 ms, mean batch 1.0`. */
function serverPart(level: LevelResult): string | undefined {
  const s = level.server;
  if (!s || s.requests === 0) return undefined;
  const p99 = s.p99BucketMs ? `, p99 ${serverP99(level)} ms` : '';
  return `${fixed2(s.avgRequestMs)} ms per request (of which queue ${fixed2(s.avgQueueMs)}, compute ${fixed2(s.avgComputeInferMs)})${p99}, mean batch ${fixed1(s.avgBatchSize)}`;
}

/** The CPU part of a level: `load generator 0.45, server 1.30, other 0.05 of 2 cores`. */
function cpuPart(level: LevelResult): string | undefined {
  const c = level.cpu;
  if (!c) return undefined;
  return `load generator ${fixed2(c.generatorCores)}, server ${fixed2(c.serverCores)}, other ${fixed2(c.otherCores)} of ${c.cores} cores${saturated(level) ? ' (saturated)' : ''}`;
}

/**
 * A level's figures in one line, for progress, the summary and bench: the client's latency, the
 * server's own time and the CPU of the generator, the server and the rest of the host.
 */
export function describeLevel(level: LevelResult): string {
  const parts = [`client p50 ${fixed2(level.p50Ms)} / p99 ${fixed2(level.p99Ms)} ms`];
  const server = serverPart(level);
  if (server) parts.push(`in the server ${server}`);
  const cpu = cpuPart(level);
  if (cpu) parts.push(`CPU: ${cpu}`);
  return parts.join('; ');
}

/** By how much the nearest point missed the objective, and why. */
export interface Miss {
  /** Its p99 minus the objective, ms. */
  readonly byMs: number;
  /** `byMs` over the objective. */
  readonly fraction: number;
  /** Where the time went, in sentences for the summary and the report. */
  readonly why: string;
}

/** `2.10 ms (30% over)`. */
export function missedBy(miss: Miss): string {
  return `${fixed2(miss.byMs)} ms (${Math.round(miss.fraction * 100)}% over)`;
}

/**
 * Why a point missed the objective, from the server's figures and the CPU over its windows: the
 * server's own p99 within the objective (the rest was spent outside it: HTTP, the client, and on a
 * host the generator shares, waiting for a core), the server slower than the objective on average,
 * the server's own tail past it (its p99's histogram bucket above the objective), or none clearly.
 */
export function explainMiss(level: LevelResult, objectiveMs: number): Miss {
  const byMs = level.p99Ms - objectiveMs;
  const objective = formatDurationMs(objectiveMs);
  const s = level.server && level.server.requests > 0 ? level.server : undefined;
  const c = level.cpu;
  const generator = c
    ? `the load generator used ${fixed2(c.generatorCores)} of the host's ${c.cores} cores beside the server's ${fixed2(c.serverCores)}` +
      ` and other processes' ${fixed2(c.otherCores)}${saturated(level) ? ': the host was saturated, so requests also waited for a core' : ''}`
    : undefined;
  const generatorSentence = generator && `${generator[0]!.toUpperCase()}${generator.slice(1)}`;
  const bucket = s?.p99BucketMs;
  let why: string;
  if (!s) {
    why = `the server's statistics could not be read to tell where the time went${generator ? `; ${generator}` : ''}.`;
  } else if (bucket?.atMostMs !== undefined && bucket.atMostMs <= objectiveMs) {
    why =
      `the server's own latency was within the objective while the client's was not: in the server ${serverPart(level)}, ` +
      `against the client's p50 ${fixed2(level.p50Ms)} / p99 ${fixed2(level.p99Ms)} ms. The rest was spent outside the server ` +
      `(HTTP, the client${c ? ', waiting for a core' : ''})${generator ? `: ${generator}` : ''}. ` +
      `Measured by a client on another machine, this config may meet ${objective}.`;
  } else if (s.avgRequestMs > objectiveMs) {
    const queued = s.avgQueueMs > s.avgComputeInferMs;
    why =
      `the server itself took longer than ${objective}: ${serverPart(level)}` +
      (queued
        ? `; most of it waiting in the queue, so a shorter queue delay or fewer requests at once would come closer`
        : `; most of it computing: the model does not run within ${objective} on this host with the configurations tried (a faster host, a GPU or a looser objective would)`) +
      (generatorSentence ? `. ${generatorSentence}` : '') +
      '.';
  } else if (bucket && bucket.aboveMs >= objectiveMs) {
    why =
      `the server's own p99 was past ${objective} too (${serverP99(level)} ms by its histogram), though a request took ` +
      `${fixed2(s.avgRequestMs)} ms there on average (of which queue ${fixed2(s.avgQueueMs)}, compute ${fixed2(s.avgComputeInferMs)}; ` +
      `mean batch ${fixed1(s.avgBatchSize)}): the tail is in the server, where a request sometimes waits for a batch, an instance or a core` +
      (generatorSentence ? `. ${generatorSentence}` : '') +
      '.';
  } else {
    why =
      `in the server ${serverPart(level)}, against the client's p50 ${fixed2(level.p50Ms)} / p99 ${fixed2(level.p99Ms)} ms: ` +
      `its histogram bucket holds ${objective}, so whether the server's own p99 was within it cannot be told` +
      (generator ? `; ${generator}` : '') +
      '.';
  }
  return { byMs, fraction: byMs / objectiveMs, why };
}

/**
 * Warnings about the host from the measurements: the levels at which the generator, the server and
 * the rest together saturated the cores, and the most the generator took then.
 */
export function hostWarnings(runs: readonly CandidateRun[]): string[] {
  const levels = runs.flatMap((r) => r.levels.map((level) => ({ id: r.id, level })));
  const busy = levels.filter((l) => saturated(l.level));
  if (busy.length === 0) return [];
  const worst = busy.reduce((a, b) => (b.level.cpu!.generatorCores > a.level.cpu!.generatorCores ? b : a));
  const cpu = worst.level.cpu!;
  const others = Math.max(...busy.map((l) => l.level.cpu!.otherCores));
  return [
    `the host's ${cpu.cores} cores were saturated at ${busy.length} of ${levels.length} levels measured: the load generator, ` +
      `which runs on this host beside the server, took up to ${fixed2(cpu.generatorCores)} cores (${worst.id} c=${worst.level.concurrency}, ` +
      `the server ${fixed2(cpu.serverCores)}) and other processes up to ${fixed2(others)}. Latency at the client includes waiting for ` +
      `a core, and throughput is what the server did with the cores left to it; run tune on a host with cores to spare beside the ` +
      `server and nothing else running, and compare the server's own figures (in report.md) with the client's.`,
  ];
}

/** Said before the sweep on a host too small to hold the generator and the server apart (2 cores or fewer). */
export function smallHostWarning(cores: number): string | undefined {
  return cores <= 2
    ? `this host has ${cores} CPU core${cores === 1 ? '' : 's'}: tune's load generator runs on ${cores === 1 ? 'it' : 'them'} beside the server it measures, ` +
        `so the client's latency includes the generator's share of the CPU (the report gives the server's own figures beside it)`
    : undefined;
}
