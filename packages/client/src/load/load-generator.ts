import { isStable, summarize, type LatencySummary } from './stats.ts';

/** One request: resolves when the response arrived whole; rejects on failure. */
export type SendRequest = () => Promise<void>;

export interface WindowOptions {
  readonly warmupMs: number;
  readonly windowMs: number;
  /** Windows until the last three throughputs agree within `tolerance`. */
  readonly minWindows: number;
  readonly maxWindows: number;
  readonly tolerance: number;
  /** Progress, one line per window. */
  readonly log?: (line: string) => void;
}

export const FULL_WINDOWS: WindowOptions = { warmupMs: 1500, windowMs: 2000, minWindows: 3, maxWindows: 6, tolerance: 0.1 };
export const SMOKE_WINDOWS: WindowOptions = { warmupMs: 100, windowMs: 200, minWindows: 1, maxWindows: 1, tolerance: 1 };

/** Closed loop: `concurrency` requests always outstanding. */
export interface ClosedLoad {
  readonly concurrency: number;
}

/**
 * Open loop: requests start at `rate` per second whatever the server does, spaced evenly
 * (`constant`) or as a Poisson process (`poisson`, exponential gaps, the default). At most
 * `maxOutstanding` are in flight; a request due while that many are outstanding is not sent
 * and is counted in `notSent` (the generator never queues without bound).
 */
export interface OpenLoad {
  readonly rate: number;
  readonly arrivals?: 'poisson' | 'constant';
  /** @default 1024 */
  readonly maxOutstanding?: number;
}

export type Load = ClosedLoad | OpenLoad;

/** Called when the measured windows begin and end (e.g. to read server statistics). */
export interface MeasureHooks {
  readonly onMeasureStart?: () => Promise<void>;
  readonly onMeasureEnd?: () => Promise<void>;
}

export interface LoadResult {
  readonly label: string;
  readonly load:
    | { readonly concurrency: number }
    | { readonly rate: number; readonly arrivals: 'poisson' | 'constant'; readonly maxOutstanding: number };
  /** Successful responses per second over the measured windows. */
  readonly throughput: number;
  readonly latencyMs: LatencySummary;
  /** Requests that completed in the measured windows, failed ones included. */
  readonly requests: number;
  readonly errors: number;
  readonly firstError?: string;
  /** Open loop only: requests due in the measured windows but not sent (outstanding bound reached). */
  readonly notSent?: number;
  /** Throughput of each window, infer/s. */
  readonly windows: number[];
  /** True when the last windows agreed within the tolerance before `maxWindows` ran out. */
  readonly stable: boolean;
}

/** A hard cap on requests per measurement, whatever the timing says. */
const MAX_REQUESTS = 2_000_000;

/**
 * perf_analyzer-style measurement: start the load, warm up, then repeat windows until the
 * throughput is stable (or `maxWindows` ran out). Bounded in time (warm-up plus every window)
 * and in count (`MAX_REQUESTS`); stops by itself.
 */
export async function measure(
  label: string,
  send: SendRequest,
  load: Load,
  options: WindowOptions,
  hooks: MeasureHooks = {},
): Promise<LoadResult> {
  // Columns rather than objects: a tiny model completes tens of thousands of requests.
  const ends: number[] = [];
  const latencies: number[] = [];
  const oks: boolean[] = [];
  let firstError: string | undefined;
  let running = true;
  let started = 0;
  const one = async () => {
    started++;
    const t0 = performance.now();
    let ok = true;
    try {
      await send();
    } catch (error) {
      ok = false;
      firstError ??= (error as Error).message;
    }
    const end = performance.now();
    ends.push(end);
    latencies.push(end - t0);
    oks.push(ok);
  };

  const begin = performance.now();
  const deadline = begin + options.warmupMs + options.windowMs * options.maxWindows + 1000;
  const active = () => running && started < MAX_REQUESTS && performance.now() < deadline;
  const notSentAt: number[] = [];
  let loops: Promise<void>;
  let loadInfo: LoadResult['load'];
  if ('concurrency' in load) {
    loadInfo = { concurrency: load.concurrency };
    loops = Promise.all(
      Array.from({ length: load.concurrency }, async () => {
        while (active()) await one();
      }),
    ).then(() => undefined);
  } else {
    const open = { rate: load.rate, arrivals: load.arrivals ?? 'poisson', maxOutstanding: load.maxOutstanding ?? 1024 } as const;
    loadInfo = open;
    loops = openLoop(open, one, active, (t) => notSentAt.push(t));
  }

  await sleep(options.warmupMs);
  await hooks.onMeasureStart?.();
  const windows: number[] = [];
  let stable = false;
  const measuredFrom = performance.now();
  let cursor = ends.length;
  while (windows.length < options.maxWindows) {
    const start = performance.now();
    await sleep(options.windowMs);
    const end = performance.now();
    let done = 0;
    // `ends` is in completion order, so each window is the slice since the last one.
    for (; cursor < ends.length && ends[cursor]! < end; cursor++) if (oks[cursor]) done++;
    windows.push(done / ((end - Math.max(start, measuredFrom)) / 1000));
    const count = Math.min(3, options.minWindows);
    stable = windows.length >= options.minWindows && isStable(windows, count, options.tolerance);
    options.log?.(`  ${label}: window ${windows.length}: ${windows.at(-1)!.toFixed(1)} infer/s${stable ? ' (stable)' : ''}`);
    if (stable) break;
  }
  const measuredTo = performance.now();
  await hooks.onMeasureEnd?.();
  running = false;
  await loops;

  const measured: number[] = [];
  let errors = 0;
  for (let i = 0; i < ends.length; i++) {
    if (ends[i]! < measuredFrom || ends[i]! >= measuredTo) continue;
    if (oks[i]) measured.push(latencies[i]!);
    else errors++;
  }
  const notSent = notSentAt.filter((t) => t >= measuredFrom && t < measuredTo).length;
  return {
    label,
    load: loadInfo,
    throughput: measured.length / ((measuredTo - measuredFrom) / 1000),
    latencyMs: summarize(measured),
    requests: measured.length + errors,
    errors,
    ...(firstError !== undefined && { firstError }),
    ...(!('concurrency' in load) && { notSent }),
    windows,
    stable,
  };
}

async function openLoop(
  load: { rate: number; arrivals: 'poisson' | 'constant'; maxOutstanding: number },
  one: () => Promise<void>,
  active: () => boolean,
  notSent: (atMs: number) => void,
): Promise<void> {
  const inFlight = new Set<Promise<void>>();
  const meanGapMs = 1000 / load.rate;
  const gap = load.arrivals === 'constant' ? () => meanGapMs : () => -Math.log(1 - Math.random()) * meanGapMs;
  let next = performance.now();
  while (active()) {
    // Timers are coarse (about 1 ms): send every request that is due, then sleep until the next.
    const now = performance.now();
    while (next <= now) {
      if (inFlight.size < load.maxOutstanding) {
        const p = one().finally(() => inFlight.delete(p));
        inFlight.add(p);
      } else {
        notSent(now);
      }
      next += gap();
    }
    await sleep(Math.max(0, next - performance.now()));
  }
  await Promise.all(inFlight);
}

/**
 * Evenly spaced open-loop arrivals at `rate(elapsedMs)` per second for `durationMs`. The
 * generator itself never queues without bound: a request due while `maxOutstanding` are in
 * flight is counted as not sent (the server never saw it). `send` records its own outcome and
 * must not reject. Resolves once every request sent has settled.
 */
export async function openLoopFor(
  durationMs: number,
  rate: (elapsedMs: number) => number,
  maxOutstanding: number,
  send: () => Promise<void>,
): Promise<{ sent: number; notSent: number }> {
  const inFlight = new Set<Promise<void>>();
  let sent = 0;
  let notSent = 0;
  const begin = performance.now();
  let next = begin;
  while (performance.now() - begin < durationMs) {
    next += 1000 / rate(next - begin);
    if (inFlight.size >= maxOutstanding) {
      notSent++;
    } else {
      sent++;
      const p = send().finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    const wait = next - performance.now();
    if (wait > 0) await sleep(wait);
  }
  await Promise.all(inFlight);
  return { sent, notSent };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
