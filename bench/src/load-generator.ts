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

export interface LoadResult {
  readonly label: string;
  /** Successful responses per second over the measured windows. */
  readonly throughput: number;
  readonly latencyMs: LatencySummary;
  readonly requests: number;
  readonly errors: number;
  readonly firstError?: string;
  readonly windows: number[];
}

interface Sample {
  readonly endMs: number;
  readonly latencyMs: number;
  readonly ok: boolean;
}

/**
 * perf_analyzer-style measurement: warm up, then repeat windows until throughput is stable,
 * with `concurrency` requests always outstanding (closed loop) or requests started at
 * `rate` per second (open loop, bounded to `maxOutstanding`).
 */
export async function measure(
  label: string,
  send: SendRequest,
  load: { readonly concurrency: number } | { readonly rate: number; readonly maxOutstanding?: number },
  options: WindowOptions,
): Promise<LoadResult> {
  const samples: Sample[] = [];
  let firstError: string | undefined;
  let running = true;
  const one = async () => {
    const started = performance.now();
    let ok = true;
    try {
      await send();
    } catch (error) {
      ok = false;
      firstError ??= (error as Error).message;
    }
    const end = performance.now();
    samples.push({ endMs: end, latencyMs: end - started, ok });
  };

  const begin = performance.now();
  const totalBudgetMs = options.warmupMs + options.windowMs * options.maxWindows;
  let loops: Promise<void>;
  if ('concurrency' in load) {
    loops = Promise.all(
      Array.from({ length: load.concurrency }, async () => {
        while (running && performance.now() - begin < totalBudgetMs) await one();
      }),
    ).then(() => undefined);
  } else {
    loops = openLoop(load.rate, load.maxOutstanding ?? 1024, one, () => running && performance.now() - begin < totalBudgetMs);
  }

  await sleep(options.warmupMs);
  const windows: number[] = [];
  const measuredFrom = performance.now();
  while (windows.length < options.maxWindows) {
    const start = performance.now();
    await sleep(options.windowMs);
    const end = performance.now();
    const done = samples.filter((s) => s.ok && s.endMs >= start && s.endMs < end).length;
    windows.push(done / ((end - start) / 1000));
    options.log?.(`  ${label}: window ${windows.length}: ${windows.at(-1)!.toFixed(1)} infer/s`);
    if (windows.length >= options.minWindows && isStable(windows, Math.min(3, options.minWindows), options.tolerance)) break;
  }
  const measuredTo = performance.now();
  running = false;
  await loops;
  const measured = samples.filter((s) => s.endMs >= measuredFrom && s.endMs < measuredTo);
  const ok = measured.filter((s) => s.ok);
  return {
    label,
    throughput: ok.length / ((measuredTo - measuredFrom) / 1000),
    latencyMs: summarize(ok.map((s) => s.latencyMs)),
    requests: measured.length,
    errors: measured.length - ok.length,
    ...(firstError !== undefined && { firstError }),
    windows,
  };
}

async function openLoop(rate: number, maxOutstanding: number, one: () => Promise<void>, active: () => boolean): Promise<void> {
  const inFlight = new Set<Promise<void>>();
  const intervalMs = 1000 / rate;
  let next = performance.now();
  while (active()) {
    if (inFlight.size < maxOutstanding) {
      const p = one().finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    next += intervalMs;
    const wait = next - performance.now();
    if (wait > 0) await sleep(wait);
  }
  await Promise.all(inFlight);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
