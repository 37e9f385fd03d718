import {
  breakdown,
  cpuShare,
  cpuSnapshot,
  readStats,
  type CpuSnapshot,
  type MeasureHooks,
  type ServerBreakdown,
} from '@batchwise/client/load';
import type { ModelStatistics } from '@batchwise/protocol';
import { figuresBetween, p99Bucket, type VersionFigures } from '../../metrics/canary-judge.ts';
import { figuresFromSamples, parsePrometheusSamples } from '../../metrics/prometheus-samples.ts';
import type { ServerProcess } from '../server-process.ts';

/** What the server did over a level's measured windows: its statistics (means per successful request) and its p99. */
export interface ServerFigures extends ServerBreakdown {
  /**
   * The bucket of the server's request-duration histogram that holds its p99, ms: the server's own
   * p99 was above `aboveMs` and at most `atMostMs` (the bounds are 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25,
   * 50 ms ...; `atMostMs` is absent past the last).
   */
  readonly p99BucketMs?: { readonly aboveMs: number; readonly atMostMs?: number };
}

/** Cores' worth of CPU over a level's measured windows, from /proc (Linux). */
export interface CpuFigures {
  /** The load generator: the `tune` process itself. */
  readonly generatorCores: number;
  /** The candidate's `serve` process, its worker threads included. */
  readonly serverCores: number;
  /** Everything else on the host. */
  readonly otherCores: number;
  /** The host's cores. */
  readonly cores: number;
}

/** The figures read beside the client's latencies; each absent when it could not be read. */
export interface LevelFigures {
  readonly server?: ServerFigures;
  readonly cpu?: CpuFigures;
}

interface Reading {
  readonly stats: ModelStatistics | undefined;
  readonly histogram: VersionFigures | undefined;
  readonly cpu: CpuSnapshot | undefined;
}

const NONE: Reading = { stats: undefined, histogram: undefined, cpu: undefined };

/**
 * Reads the server's statistics, its request-duration histogram and the CPU of the generator and
 * the server when a measurement's windows begin and end (the hooks of `measure`), then `figures()`
 * gives what happened between. A reading that fails leaves its figure out: they explain a
 * measurement, they do not make it.
 */
export function levelFigures(server: ServerProcess, model: string): MeasureHooks & { figures(): LevelFigures } {
  const pids = [process.pid, server.child.pid!];
  const read = async (opening: boolean): Promise<Reading> => {
    // The CPU window is the innermost: opened after the HTTP readings, closed before them.
    const closing = opening ? undefined : cpuSnapshot(pids);
    const stats = await readStats(server.httpUrl, model).catch(() => undefined);
    const histogram = stats && (await scrape(server.metricsUrl, model, stats.version));
    return { stats, histogram, cpu: opening ? cpuSnapshot(pids) : closing };
  };
  let start = NONE;
  let end = NONE;
  return {
    onMeasureStart: async () => void (start = await read(true)),
    onMeasureEnd: async () => void (end = await read(false)),
    figures() {
      const share = cpuShare(start.cpu, end.cpu);
      const server = start.stats && end.stats && breakdown(start.stats, end.stats);
      const p99 = start.histogram && end.histogram && p99Bucket(figuresBetween(start.histogram, end.histogram));
      const ms = (seconds: number) => Math.round(seconds * 1e6) / 1e3;
      const p99BucketMs = p99 && {
        aboveMs: ms(p99.aboveSeconds),
        ...(Number.isFinite(p99.atMostSeconds) && { atMostMs: ms(p99.atMostSeconds) }),
      };
      return {
        ...(server && { server: { ...server, ...(p99BucketMs && { p99BucketMs }) } }),
        ...(share && {
          cpu: { generatorCores: share.pidCores[0]!, serverCores: share.pidCores[1]!, otherCores: share.otherCores, cores: share.cores },
        }),
      };
    },
  };
}

async function scrape(metricsUrl: string, model: string, version: string): Promise<VersionFigures | undefined> {
  try {
    const response = await fetch(metricsUrl);
    return response.ok ? figuresFromSamples(parsePrometheusSamples(await response.text()), model, version) : undefined;
  } catch {
    return undefined;
  }
}
