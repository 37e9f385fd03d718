import { mlp } from '@batchwise/modelgen';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { h2loadHttp, h2loadInstalled, httpRequestFile, type H2loadResult } from '../h2load.ts';
import { environment, ratioCheck, reportScenario, type Check } from '../report.ts';
import { benchRepository, cachedModel } from '../workload.ts';
import type { BatchingModel } from './batching.ts';
import {
  OBJECTIVE_OVER_C1_P50,
  objectiveTwinConfig,
  OK_RATE_TARGET,
  P99_OVER_OBJECTIVE_TARGET,
  TARGET_CONCURRENCY,
} from './objective-overload.ts';

/** The objectives of the curve, in the issue's objective (4x the one-client p50, or --objective-ms). */
export const CURVE_FACTORS: readonly number[] = [0.65, 0.8, 1, 1.25, 1.6];
const WARM_UP_SECONDS = 2;

export interface CurvePoint {
  /** `static`, or the twin's objective in milliseconds. */
  readonly model: string;
  readonly objectiveMs?: number;
  readonly rounds: readonly H2loadResult[];
}

/**
 * The latency objective's trade-off at 64 closed-loop clients, measured by a C client (issue 44): the
 * 6x1024 MLP without an objective (`static`, `dynamic_batching { }`) and twins with objectives around
 * the issue's (4x the one-client p50 of `static`, or `objectiveMs`), all in one server process, h2load
 * over HTTP/1.1 (one request at a time per connection) with every request logged. For each twin: its
 * 200s per second over the static twin's of the same round, and the p99 of its 200s over its objective.
 * Where no twin has both the issue's throughput and its tail, the curve shows which one the machine
 * cannot give. Rounds are interleaved (static first, then each twin) so that a change in the machine's
 * speed reaches every model alike.
 */
export async function runObjectiveCurve(options: {
  model: BatchingModel;
  seconds: number;
  rounds: number;
  log: (line: string) => void;
  objectiveMs?: number;
  factors?: readonly number[];
  name?: string;
  /** Seconds of h2load's warm-up before each measurement (WARM_UP_SECONDS); 0 for the smoke test. */
  warmUpSeconds?: number;
}) {
  const { model, log } = options;
  const warmUpSeconds = options.warmUpSeconds ?? WARM_UP_SECONDS;
  const name = options.name ?? 'objective-curve';
  if (!(await h2loadInstalled())) {
    log(`${name}: h2load is not installed (Debian's nghttp2-client); nothing measured`);
    return { points: [] as CurvePoint[], checks: [] as Check[] };
  }
  const label = `mlp-${model.layers}x${model.width}`;
  const file = await cachedModel(label, () => mlp({ layers: model.layers, width: model.width }), log);
  const config = (modelName: string, objectiveMs?: number) => objectiveTwinConfig(modelName, model, objectiveMs);
  const factors = options.factors ?? CURVE_FACTORS;
  // A server on a repository of these models (the scenario's folder written afresh).
  const measureServer = async (entries: { name: string; objectiveMs?: number }[]) =>
    startServerProcess([
      '--model-repository',
      await benchRepository(
        name,
        entries.map((e) => ({ name: e.name, modelFile: file, config: config(e.name, e.objectiveMs) })),
      ),
    ]);

  let baseMs = options.objectiveMs;
  if (baseMs === undefined) {
    const server = await measureServer([{ name: 'static' }]);
    try {
      const oneClient = await h2loadHttp({
        url: `${server.httpUrl}/v2/models/static/infer`,
        request: await httpRequestFile('static', model.width),
        connections: 1,
        seconds: options.seconds,
        warmUpSeconds,
      });
      baseMs = Math.max(0.1, Math.round(oneClient.p50Ms * OBJECTIVE_OVER_C1_P50 * 100) / 100);
      log(`one-client p50 ${oneClient.p50Ms.toFixed(2)} ms (h2load): objective ${baseMs} ms`);
    } finally {
      await server.stop();
    }
  }
  const twins = factors.map((f, i) => ({ name: `objective_${i}`, objectiveMs: Math.round(baseMs! * f * 100) / 100, factor: f }));
  const server = await measureServer([{ name: 'static' }, ...twins]);
  const points: CurvePoint[] = [
    { model: 'static', rounds: [] },
    ...twins.map((t) => ({ model: t.name, objectiveMs: t.objectiveMs, rounds: [] })),
  ];
  try {
    const requests = new Map(await Promise.all(points.map(async (p) => [p.model, await httpRequestFile(p.model, model.width)] as const)));
    for (let round = 0; round < options.rounds; round++) {
      for (const point of points) {
        const result = await h2loadHttp({
          url: `${server.httpUrl}/v2/models/${point.model}/infer`,
          request: requests.get(point.model)!,
          connections: TARGET_CONCURRENCY,
          seconds: options.seconds,
          warmUpSeconds,
        });
        (point.rounds as H2loadResult[]).push(result);
        log(
          `round ${round + 1} ${point.model}${point.objectiveMs !== undefined ? ` (${point.objectiveMs} ms)` : ''}: ` +
            `${result.perSecond.toFixed(0)} 200/s, p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms, ` +
            `${(result.statusPerSecond[503] ?? 0).toFixed(0)} 503/s`,
        );
      }
    }
  } finally {
    await server.stop();
  }

  const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const staticRounds = points[0]!.rounds;
  // Each twin's 200s over the static twin's of the same round, then the mean over rounds.
  const overStatic = (p: CurvePoint) => mean(p.rounds.map((r, i) => r.perSecond / staticRounds[i]!.perSecond));
  const p99Over = (p: CurvePoint) => mean(p.rounds.map((r) => r.p99Ms)) / p.objectiveMs!;
  const rows = points.map((p) => [
    p.model,
    p.objectiveMs ?? '',
    mean(p.rounds.map((r) => r.perSecond)),
    p.objectiveMs === undefined ? '' : overStatic(p),
    mean(p.rounds.map((r) => r.p50Ms)),
    mean(p.rounds.map((r) => r.p90Ms)),
    mean(p.rounds.map((r) => r.p99Ms)),
    p.objectiveMs === undefined ? '' : p99Over(p),
    mean(p.rounds.map((r) => r.statusPerSecond[503] ?? 0)),
    mean(p.rounds.map((r) => r.errors - (r.statusPerSecond[503] ?? 0) * r.seconds)),
  ]);
  const checks: Check[] = [];
  const issues = points.find((p) => p.objectiveMs === baseMs);
  if (issues) {
    checks.push(
      ratioCheck(
        `ok_per_second_objective_vs_static_c${TARGET_CONCURRENCY}`,
        overStatic(issues),
        { atLeast: OK_RATE_TARGET },
        `objective ${baseMs} ms`,
      ),
    );
    checks.push(
      ratioCheck(
        `p99_over_objective_c${TARGET_CONCURRENCY}`,
        p99Over(issues),
        { atMost: P99_OVER_OBJECTIVE_TARGET },
        `objective ${baseMs} ms`,
      ),
    );
  }
  // The frontier: of the twins whose tail keeps the issue's bound, the most throughput.
  const inTime = points.filter((p) => p.objectiveMs !== undefined && p99Over(p) <= P99_OVER_OBJECTIVE_TARGET);
  const best = inTime.sort((a, b) => overStatic(b) - overStatic(a))[0];
  const notes = [
    best
      ? `the most 200s per second of a twin whose p99 is within ${P99_OVER_OBJECTIVE_TARGET}x its objective: ${overStatic(best).toFixed(2)} of static (objective ${best.objectiveMs} ms)`
      : `no twin kept its p99 within ${P99_OVER_OBJECTIVE_TARGET}x its objective`,
  ];
  const env = environment();
  const result = { model: label, environment: env, objectiveMs: baseMs, factors, points, checks };
  await reportScenario(
    {
      name,
      title: `pnpm bench objective-curve: ${label} at ${TARGET_CONCURRENCY} clients, objectives around ${baseMs} ms`,
      intro:
        `h2load over HTTP/1.1, ${TARGET_CONCURRENCY} connections of one request at a time, ${options.seconds} s after ${warmUpSeconds} s of ` +
        `warm-up, ${options.rounds} interleaved rounds, every request logged; p50/p90/p99 of the 200 answers only, means over the rounds ` +
        `(${env['date']}). over static: a twin's 200s per second over the static twin's of the same round.`,
      tables: [
        {
          headers: [
            'model',
            'objective ms',
            '200/s',
            'over static',
            'p50 ms',
            'p90 ms',
            'p99 ms',
            'p99 over objective',
            '503/s',
            'other errors',
          ],
          rows,
        },
      ],
      notes,
      checks,
      json: result,
    },
    log,
  );
  return result;
}
