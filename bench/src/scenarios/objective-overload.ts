import { mlp } from '@batchwise/modelgen';
import { type Load, type WindowOptions } from '@batchwise/client/load';
import { startServerProcess, type ServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { leanFp32Client } from '../lean-http.ts';
import { measureLean, type LeanReading } from '../lean-measure.ts';
import { environment, ratioCheck, reportScenario, type Check } from '../report.ts';
import { classifyThreads, type ThreadRoles } from '../threads.ts';
import { addModel, benchRepository, cachedModel, fp32Config } from '../workload.ts';
import type { BatchingModel } from './batching.ts';

export const OBJECTIVE_OVERLOAD_MODEL: BatchingModel = { layers: 6, width: 1024 };
/** The objective, in one-client p50s of the model without it (issue 30). */
export const OBJECTIVE_OVER_C1_P50 = 4;
/** The open loop's rate, in saturated rates (the most 200s per second the static config answered closed loop). */
const OPEN_LOOP_OVER_SATURATED = 2;
/** The open loop's bound on outstanding requests (and connections); past it a due request is counted unsent. */
const OPEN_LOOP_MAX_OUTSTANDING = 256;
/** The load of the targets: at 64 clients. */
export const TARGET_CONCURRENCY = 64;
/** At TARGET_CONCURRENCY: the objective's 200s per second over the static config's (issue 44; issue 30 asked 0.7). */
export const OK_RATE_TARGET = 0.8;
/** At TARGET_CONCURRENCY: the p99 of answered requests over the objective (issue 44). */
export const P99_OVER_OBJECTIVE_TARGET = 1.25;
/**
 * Everywhere else: the objective must not serve less than no objective. One measurement's 200s
 * per second moves by a few percent from run to run on these cores, so a row is flagged below 0.95.
 */
const NEVER_LESS_TARGET = 0.95;
/** Refusals per second below which a row shows no cost per refusal. */
const MIN_REFUSALS_COSTED = 50;
/** The load that tells the server's threads apart (bench/src/threads.ts), on both twins, before the measurements. */
const CLASSIFY_MS = 400;

/** The MLP's config: max_batch_size 64, `dynamic_batching { }`, and the latency objective when one is given. */
export function objectiveTwinConfig(name: string, model: BatchingModel, objectiveMs?: number): string {
  return fp32Config(name, {
    width: model.width,
    maxBatchSize: 64,
    batching: true,
    ...(objectiveMs !== undefined && { parameters: { batchwise_latency_objective_ms: String(objectiveMs) } }),
  });
}

export type OverloadModel = 'static' | 'objective';

export interface ObjectiveOverloadRow {
  readonly model: OverloadModel;
  /** `c=64` or `open 2x` */
  readonly load: string;
  readonly concurrency?: number;
  readonly rate?: number;
  readonly reading: LeanReading;
}

/**
 * The latency objective under overload (issue 30): the 6x1024 FP32 MLP (max_batch_size 64, one
 * instance, `dynamic_batching { }`) as `static`, and its twin `objective` with
 * `batchwise_latency_objective_ms` at 4x the one-client p50 of `static`, measured first on the
 * same server process, which then loads `objective` through the repository API (explicit model
 * control). The twins are measured one after the other, HTTP binary with the lean client, one
 * row per request: closed loop at each
 * concurrency, then open loop (evenly spaced, at most 256 outstanding) at twice the saturated
 * rate. The order alternates from load to load, and at 64 clients, where the targets are, each
 * twin is measured twice (static, objective, objective, static).
 */
export async function runObjectiveOverload(options: {
  model: BatchingModel;
  concurrencies: readonly number[];
  windows: WindowOptions;
  log: (line: string) => void;
  name?: string;
  /** A fixed objective instead of 4x the one-client p50 (that p50 varies run to run: for A/B comparisons). */
  objectiveMs?: number;
}) {
  const { model, log } = options;
  const env = environment();
  const label = `mlp-${model.layers}x${model.width}`;
  const file = await cachedModel(label, () => mlp({ layers: model.layers, width: model.width }), log);
  const config = (name: OverloadModel, objectiveMs?: number) => objectiveTwinConfig(name, model, objectiveMs);

  // One server process for both twins: `static` first (explicit model control), measured at one
  // client; then `objective`, written into the repository with the objective and loaded through the repository API.
  const repo = await benchRepository('objective-overload', [{ name: 'static', modelFile: file, config: config('static') }]);
  const rows: ObjectiveOverloadRow[] = [];
  const server = await startServerProcess(['--model-repository', repo, '--model-control-mode', 'explicit', '--load-model', 'static']);
  let c1: LeanReading;
  let objectiveMs: number;
  let roles: ThreadRoles | undefined;
  try {
    c1 = await measureOne(server, 'static', model.width, { concurrency: 1 }, 'static c=1 (calibration)', options.windows, log);
    objectiveMs = options.objectiveMs ?? Math.max(0.1, Math.round(c1.client.latencyMs.p50 * OBJECTIVE_OVER_C1_P50 * 100) / 100);
    log(
      `one-client p50 ${c1.client.latencyMs.p50.toFixed(2)} ms: objective ${objectiveMs} ms${options.objectiveMs ? ' (--objective-ms)' : ''}`,
    );
    await addModel(repo, { name: 'objective', modelFile: file, config: config('objective', objectiveMs) });
    const loaded = await fetch(`${server.httpUrl}/v2/repository/models/objective/load`, { method: 'POST', body: '{}' });
    if (!loaded.ok) throw new Error(`loading 'objective' answered ${loaded.status}: ${await loaded.text()}`);
    // The main thread's CPU per answer is read per thread (what refusals cost lands on it): a short load on
    // both twins first, so that each one's worker thread has worked.
    const warm = (['static', 'objective'] as const).map((m) => leanFp32Client(server.httpUrl, m, model.width));
    roles = await classifyThreads(server.child.pid!, async () => {
      const until = performance.now() + CLASSIFY_MS;
      await Promise.all(
        warm.flatMap((c) =>
          [c, c].map(async () => {
            while (performance.now() < until) await c.send();
          }),
        ),
      );
    });
    for (const c of warm) c.close();
    const run = async (m: OverloadModel, load: Load, tag: string) => {
      const reading = await measureOne(server, m, model.width, load, `${m} ${tag}`, options.windows, log, roles);
      rows.push({ model: m, load: tag, ...('concurrency' in load ? { concurrency: load.concurrency } : { rate: load.rate }), reading });
    };
    const orderAt = (i: number, mirrored: boolean): OverloadModel[] => {
      const pair: OverloadModel[] = i % 2 === 0 ? ['static', 'objective'] : ['objective', 'static'];
      return mirrored ? [...pair, ...[...pair].reverse()] : pair;
    };
    for (const [i, concurrency] of options.concurrencies.entries()) {
      for (const m of orderAt(i, concurrency === TARGET_CONCURRENCY)) await run(m, { concurrency }, `c=${concurrency}`);
    }
    const saturated = Math.max(...rows.filter((r) => r.model === 'static').map((r) => r.reading.client.throughput));
    const rate = Math.round(saturated * OPEN_LOOP_OVER_SATURATED);
    log(`saturated (static, closed loop): ${saturated.toFixed(0)}/s; open loop at ${rate}/s`);
    for (const m of orderAt(options.concurrencies.length, false)) {
      await run(m, { rate, arrivals: 'constant', maxOutstanding: OPEN_LOOP_MAX_OUTSTANDING }, `open ${rate}/s`);
    }
  } finally {
    await server.stop();
  }

  // Per load, each twin's mean over its measurements.
  const loads = [...new Set(rows.map((r) => r.load))];
  const mean = (m: OverloadModel, load: string, of: (r: LeanReading) => number) => {
    const values = rows.filter((r) => r.model === m && r.load === load).map((r) => of(r.reading));
    return values.reduce((a, b) => a + b, 0) / values.length;
  };
  const ok = (r: LeanReading) => r.client.throughput;
  const ratios: Record<string, number> = {};
  const checks: Check[] = [];
  for (const load of loads) {
    const key = load.startsWith('open') ? 'open' : load.replace('=', '');
    const ratio = mean('objective', load, ok) / mean('static', load, ok);
    ratios[`ok_per_second_objective_vs_static_${key}`] = ratio;
    if (load === `c=${TARGET_CONCURRENCY}`) {
      ratios['p99_over_objective_c64'] = mean('objective', load, (r) => r.client.latencyMs.p99) / objectiveMs;
      checks.push(ratioCheck(`ok_per_second_objective_vs_static_${key}`, ratio, { atLeast: OK_RATE_TARGET }));
      checks.push(
        ratioCheck(
          'p99_over_objective_c64',
          ratios['p99_over_objective_c64'],
          { atMost: P99_OVER_OBJECTIVE_TARGET },
          `objective ${objectiveMs} ms`,
        ),
      );
    } else {
      checks.push(
        ratioCheck(`ok_per_second_objective_vs_static_${key}`, ratio, { atLeast: NEVER_LESS_TARGET }, 'never less than no objective'),
      );
    }
  }

  // What refusals cost: the objective's main-thread CPU beyond what its 200s cost at the static twin's
  // main-thread CPU per 200 under the same load, per refusal and as a share of the server's CPU. Refusals
  // are decided and answered on the main thread; what the objective's smaller batches cost the model's
  // threads is not counted as theirs.
  const mainCores = (r: ObjectiveOverloadRow) => r.reading.threads?.main.cores;
  const ok200 = (r: ObjectiveOverloadRow) => r.reading.statusPerSecond[200] ?? 0;
  const staticMainUsPer200 = (load: string) => {
    const values = rows
      .filter((r) => r.model === 'static' && r.load === load && mainCores(r) !== undefined && ok200(r) > 0)
      .map((r) => (mainCores(r)! * 1e6) / ok200(r));
    return values.length > 0 ? values.reduce((a, b) => a + b, 0) / values.length : undefined;
  };
  const refusalCost = (r: ObjectiveOverloadRow): { usPerRefusal: number; share: number } | undefined => {
    const refused = r.reading.statusPerSecond[503] ?? 0;
    const base = staticMainUsPer200(r.load);
    const main = mainCores(r);
    // A few refusals a second say nothing of their cost beside the noise of thousands of 200s.
    if (r.model !== 'objective' || refused < MIN_REFUSALS_COSTED || base === undefined || main === undefined || !r.reading.serverCores) {
      return undefined;
    }
    const refusalCores = Math.max(0, main - (ok200(r) * base) / 1e6);
    return { usPerRefusal: (refusalCores * 1e6) / refused, share: refusalCores / r.reading.serverCores };
  };
  const headers = [
    'model',
    'load',
    '200/s',
    'p50 ms',
    'p99 ms',
    '503/s',
    'other/s',
    'unsent/s',
    'avg batch',
    'client cpu',
    'server cpu',
    'srv us/200',
    'main us/200',
    'main us/503',
    '503 cpu share',
    'other cpu',
  ];
  const table_ = rows.map((r) => {
    const s = r.reading.statusPerSecond;
    const others = Object.entries(s)
      .filter(([code]) => code !== '200' && code !== '503')
      .reduce((a, [, n]) => a + n, 0);
    return [
      r.model,
      r.load,
      r.reading.client.throughput,
      r.reading.client.latencyMs.p50,
      r.reading.client.latencyMs.p99,
      s[503] ?? 0,
      others,
      r.reading.client.notSent === undefined ? '' : r.reading.client.notSent / r.reading.windowSeconds,
      r.reading.server?.avgBatchSize ?? '',
      r.reading.clientCores,
      r.reading.serverCores ?? '',
      r.reading.serverCores && ok200(r) > 0 ? (r.reading.serverCores * 1e6) / ok200(r) : '',
      mainCores(r) !== undefined && ok200(r) > 0 ? (mainCores(r)! * 1e6) / ok200(r) : '',
      refusalCost(r)?.usPerRefusal ?? '',
      refusalCost(r)?.share ?? '',
      r.reading.otherCores ?? '',
    ];
  });
  const c64Refusals = rows.filter((r) => r.load === `c=${TARGET_CONCURRENCY}`).flatMap((r) => refusalCost(r) ?? []);
  if (c64Refusals.length > 0) {
    ratios['refusal_cpu_share_c64'] = c64Refusals.reduce((a, c) => a + c.share, 0) / c64Refusals.length;
    ratios['main_us_per_refusal_c64'] = c64Refusals.reduce((a, c) => a + c.usPerRefusal, 0) / c64Refusals.length;
  }
  const result = {
    model: label,
    environment: env,
    oneClientP50Ms: c1.client.latencyMs.p50,
    objectiveMs,
    configs: { static: config('static'), objective: config('objective', objectiveMs) },
    rows,
    ratios,
    checks,
  };
  await reportScenario(
    {
      name: options.name ?? 'objective-overload',
      title: `pnpm bench objective-overload: ${label}, a latency objective of ${objectiveMs} ms under overload`,
      intro:
        `One-client p50 of the model without an objective ${c1.client.latencyMs.p50.toFixed(2)} ms, objective ` +
        `${OBJECTIVE_OVER_C1_P50}x that. Both twins in one server process, HTTP binary, the lean client, one row per request; ` +
        `p50 and p99 of the 200 answers only (${env['date']}). srv us/200: the server's CPU per 200 answer (every thread); ` +
        `main us/200: its main thread's; main us/503: the objective's main-thread CPU beyond its 200s at the static ` +
        `twin's main us/200 under the same load, per refusal; 503 cpu share: that CPU over the server's.`,
      tables: [{ headers, rows: table_ }],
      checks,
      json: result,
    },
    log,
  );
  return result;
}

async function measureOne(
  server: ServerProcess,
  model: OverloadModel,
  width: number,
  load: Load,
  label: string,
  windows: WindowOptions,
  log: (line: string) => void,
  roles?: ThreadRoles,
): Promise<LeanReading> {
  const client = leanFp32Client(server.httpUrl, model, width);
  try {
    return await measureLean(
      label,
      client,
      load,
      { ...windows, log },
      { pid: server.child.pid!, stats: { httpUrl: server.httpUrl, model }, ...(roles && { threads: roles }) },
    );
  } finally {
    client.close();
  }
}
