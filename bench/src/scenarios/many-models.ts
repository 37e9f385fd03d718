import { readFile, stat } from 'node:fs/promises';
import { HttpClient } from '@batchwise/client';
import { summarize, type LatencySummary } from '@batchwise/client/load';
import { mlp, mulberry32 } from '@batchwise/modelgen';
import { INSTANCE_WORKER_BYTES } from '@batchwise/server/test-support/model-footprint.ts';
import { startServerProcess, type ServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { environment, table, writeResult } from '../report.ts';
import { benchRepository, cachedModel, fp32Config, type RepositoryEntry } from '../workload.ts';

/** Issue 27's traffic: this many models, together this many times the limit, popularity Zipf(ZIPF_S). */
export const MANY_MODELS = { models: 40, overLimit: 4, zipf: 1.1, clients: 16 } as const;

export interface ManyModelsOptions {
  readonly models: number;
  /** MLP width: 2 layers of width x width FP32 weights (768: 4.7 MB a model). */
  readonly width: number;
  readonly clients: number;
  readonly durationMs: number;
  readonly log: (line: string) => void;
  readonly name: string;
}

/** How one configuration served the traffic. */
export interface ManyModelsRun {
  readonly config: string;
  readonly requests: number;
  readonly failed: number;
  readonly firstFailure: string | undefined;
  readonly throughput: number;
  /** Requests that found their model loaded, as a share of all (the server counts those that waited). */
  readonly hitRate: number;
  readonly hitLatencyMs: LatencySummary;
  readonly waitedLatencyMs: LatencySummary | undefined;
  readonly loads: number;
  /** Mean time a load spent opening and warming up its instance (the server's `session` phase). */
  readonly meanSessionMs: number | undefined;
  /** Mean time a load waited for evictions to make room (the server's `room` phase). */
  readonly meanRoomMs: number | undefined;
  readonly evictionsPerMinute: number;
  readonly restRssBytes: number;
  readonly peakRssBytes: number;
  readonly modelMemoryLimitBytes: number | undefined;
  readonly peakModelMemoryBytes: number;
}

/** Ranks 1..n with probability proportional to 1 / rank^s. */
export function zipfSampler(n: number, s: number, random: () => number): () => number {
  const weights = Array.from({ length: n }, (_, i) => 1 / (i + 1) ** s);
  const total = weights.reduce((a, b) => a + b, 0);
  const cumulative: number[] = [];
  let sum = 0;
  for (const w of weights) cumulative.push((sum += w / total));
  return () => {
    const u = random();
    const i = cumulative.findIndex((c) => u <= c);
    return i < 0 ? n - 1 : i;
  };
}

/** Reads one series of a Prometheus text page (labels written as the server writes them). */
async function metric(server: ServerProcess, series: string): Promise<number> {
  const text = await (await fetch(server.metricsUrl)).text();
  for (const line of text.split('\n')) if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  return 0;
}

async function rss(pid: number, field: 'VmRSS' | 'VmHWM'): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
}

/**
 * `pnpm bench many-models` (issue 27): `models` MLPs that together take MANY_MODELS.overLimit times
 * --model-memory-limit, asked for by `clients` closed-loop clients with Zipf(1.1) popularity for
 * `durationMs`, on three servers in turn: --load-on-demand under the limit; every model loaded at
 * start-up without a limit (the models fit this machine's memory); and a naive server that unloads
 * a model after every request (explicit mode, --load-on-demand, the client unloading after each
 * answer). Every configuration sees the same sequence of models per client.
 */
export async function runManyModels(options: ManyModelsOptions): Promise<ManyModelsRun[]> {
  const { log } = options;
  const file = (i: number) =>
    cachedModel(`mlp-2x${options.width}-seed${i + 1}`, () => mlp({ layers: 2, width: options.width, seed: i + 1 }), log);
  const entries: RepositoryEntry[] = [];
  const files: string[] = [];
  for (let i = 0; i < options.models; i++) {
    const name = `model${String(i).padStart(2, '0')}`;
    files.push(await file(i));
    entries.push({ name, modelFile: files[i]!, config: fp32Config(name, { width: options.width, maxBatchSize: 8, batching: true }) });
  }
  const repo = await benchRepository('many-models', entries);
  const weights = (await stat(files[0]!)).size;
  // What the limit counts of a model: its weights and its instance's worker thread.
  const footprint = weights + INSTANCE_WORKER_BYTES;
  const limit = Math.floor((footprint * options.models) / MANY_MODELS.overLimit);
  log(
    `${options.models} models of ${(weights / 2 ** 20).toFixed(1)} MiB and a worker (${((footprint * options.models) / 2 ** 20).toFixed(0)} MiB together), ` +
      `--model-memory-limit ${(limit / 2 ** 20).toFixed(1)} MiB (${Math.floor(limit / footprint)} models); ${options.clients} clients, Zipf(${MANY_MODELS.zipf}), ${options.durationMs / 1000} s each`,
  );
  const configs = [
    { config: 'on-demand', args: ['--load-on-demand', '--model-memory-limit', String(limit)], unloadAfter: false },
    { config: 'all-loaded', args: [], unloadAfter: false },
    { config: 'naive-unload', args: ['--model-control-mode', 'explicit', '--load-on-demand'], unloadAfter: true },
  ];
  const runs: ManyModelsRun[] = [];
  for (const c of configs) {
    log(`-- ${c.config}: serve ${c.args.join(' ')}`);
    runs.push(await runOne(repo, entries, c, limit, options));
  }
  log(
    `\n${table(
      [
        'config',
        'requests',
        'failed',
        'req/s',
        'hit rate',
        'hit p50 ms',
        'hit p99 ms',
        'waited p50 ms',
        'waited p99 ms',
        'loads',
        'room ms',
        'session ms',
        'evictions/min',
        'rest RSS MiB',
        'peak RSS MiB',
        'model MiB peak',
      ],
      runs.map((r) => [
        r.config,
        r.requests,
        r.failed,
        r.throughput,
        r.hitRate,
        r.hitLatencyMs.p50,
        r.hitLatencyMs.p99,
        r.waitedLatencyMs?.p50 ?? '-',
        r.waitedLatencyMs?.p99 ?? '-',
        r.loads,
        r.meanRoomMs ?? '-',
        r.meanSessionMs ?? '-',
        r.evictionsPerMinute,
        r.restRssBytes / 2 ** 20,
        r.peakRssBytes / 2 ** 20,
        r.peakModelMemoryBytes / 2 ** 20,
      ]),
    )}`,
  );
  const onDemand = runs[0]!;
  log(
    `on-demand: ${onDemand.failed} requests failed (must be 0); peak RSS ${(onDemand.peakRssBytes / 2 ** 20).toFixed(0)} MiB = ` +
      `${(onDemand.restRssBytes / 2 ** 20).toFixed(0)} MiB at rest + ${((onDemand.peakRssBytes - onDemand.restRssBytes) / 2 ** 20).toFixed(0)} MiB ` +
      `against a ${(limit / 2 ** 20).toFixed(1)} MiB model memory limit (the rest is the runtime's share: ONNX Runtime, each instance's worker thread)`,
  );
  await writeResult(options.name, {
    environment: environment(),
    ...options,
    log: undefined,
    weightsBytes: weights,
    limitBytes: limit,
    runs,
  });
  return runs;
}

async function runOne(
  repo: string,
  entries: readonly RepositoryEntry[],
  c: { config: string; args: readonly string[]; unloadAfter: boolean },
  limit: number,
  options: ManyModelsOptions,
): Promise<ManyModelsRun> {
  const server = await startServerProcess(['--model-repository', repo, ...c.args]);
  const client = new HttpClient({ url: server.httpUrl, connections: options.clients });
  const pid = server.child.pid!;
  try {
    const restRssBytes = await rss(pid, 'VmRSS');
    const phase = async (name: 'room' | 'session') => ({
      seconds: await metric(server, `batchwise_model_load_duration_seconds_sum{phase="${name}"}`),
      count: await metric(server, `batchwise_model_load_duration_seconds_count{phase="${name}"}`),
    });
    const phasesBefore = { room: await phase('room'), session: await phase('session') };
    const before = {
      waited: await metric(server, 'batchwise_model_load_wait_seconds_count'),
      loads: await metric(server, 'batchwise_model_loads_total'),
      evictions: await metric(server, 'batchwise_model_evictions_total'),
    };
    const data = new Float32Array(options.width).fill(0.25);
    const latencies: number[] = [];
    const failures: string[] = [];
    let peakModelMemoryBytes = 0;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        peakModelMemoryBytes = Math.max(peakModelMemoryBytes, await metric(server, 'batchwise_model_memory_bytes'));
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    const started = performance.now();
    const until = started + options.durationMs;
    await Promise.all(
      Array.from({ length: options.clients }, async (_, clientIndex) => {
        const next = zipfSampler(entries.length, MANY_MODELS.zipf, mulberry32(1000 + clientIndex));
        while (performance.now() < until) {
          const model = entries[next()]!.name;
          const sent = performance.now();
          try {
            await client.infer({ model, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, options.width], data }], binary: true });
            latencies.push(performance.now() - sent);
          } catch (error) {
            failures.push(`${model}: ${(error as Error).message}`);
          }
          if (c.unloadAfter)
            await fetch(`${server.httpUrl}/v2/repository/models/${model}/unload`, { method: 'POST' }).then((r) => r.arrayBuffer());
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    watching = false;
    await watcher;
    const waited = (await metric(server, 'batchwise_model_load_wait_seconds_count')) - before.waited;
    const loads = (await metric(server, 'batchwise_model_loads_total')) - before.loads;
    const evictions = (await metric(server, 'batchwise_model_evictions_total')) - before.evictions;
    const meanMs = async (name: 'room' | 'session') => {
      const after = await phase(name);
      const count = after.count - phasesBefore[name].count;
      return count > 0 ? ((after.seconds - phasesBefore[name].seconds) / count) * 1000 : undefined;
    };
    // The server counts the requests that waited for a load; theirs are the slowest answers (a load
    // takes tens of milliseconds or more, an answer from a loaded model a few).
    const sorted = [...latencies].sort((a, b) => a - b);
    const hits = sorted.slice(0, Math.max(0, sorted.length - waited));
    const waitedLatencies = sorted.slice(hits.length);
    const run: ManyModelsRun = {
      config: c.config,
      requests: latencies.length + failures.length,
      failed: failures.length,
      firstFailure: failures[0],
      throughput: latencies.length / seconds,
      hitRate: latencies.length > 0 ? hits.length / latencies.length : 0,
      hitLatencyMs: summarize(hits),
      waitedLatencyMs: waitedLatencies.length > 0 ? summarize(waitedLatencies) : undefined,
      loads,
      meanSessionMs: await meanMs('session'),
      meanRoomMs: await meanMs('room'),
      evictionsPerMinute: (evictions / seconds) * 60,
      restRssBytes,
      peakRssBytes: await rss(pid, 'VmHWM'),
      modelMemoryLimitBytes: c.args.includes('--model-memory-limit') ? limit : undefined,
      peakModelMemoryBytes,
    };
    options.log(
      `${c.config}: ${run.requests} requests, ${run.failed} failed, hit rate ${run.hitRate.toFixed(3)}, ${loads} loads, ${evictions} evictions` +
        (run.firstFailure ? ` (first failure: ${run.firstFailure})` : ''),
    );
    return run;
  } finally {
    await client.close();
    await server.stop();
  }
}
