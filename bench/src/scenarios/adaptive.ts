import { readFile } from 'node:fs/promises';
import { BatchwiseClientError, HttpClient } from '@batchwise/client';
import { mlp } from '@batchwise/modelgen';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { measure, openLoopFor, summarize, type LatencySummary, type WindowOptions } from '@batchwise/client/load';
import { environment, reportScenario, type Check } from '../report.ts';
import { breakdown, readStats, type ServerBreakdown } from '../server-stats.ts';
import { benchRepository, cachedModel, fp32Config } from '../workload.ts';
import { THREADS, type BatchingModel } from './batching.ts';

const MAX_BATCH_SIZE = 64;
/** The generator's cap on outstanding requests; past it a due request is counted as not sent. */
const MAX_OUTSTANDING = 1024;
/** The objective, in batch-1 run times (issue 18). */
const OBJECTIVE_OVER_BATCH1 = 4;
/** Without --static-config: a fixed delay that suits the steady phase (stated in the output). */
const FALLBACK_STATIC_DELAY_US = 1000;

type ServerName = 'default' | 'static' | 'objective';
type PhaseName = 'quiet' | 'steady' | 'burst';

export interface PhaseResult {
  readonly sent: number;
  readonly okLatencyMs: LatencySummary;
  /** Answered within the objective, per second of the phase. */
  readonly goodputPerSecond: number;
  /** 503 for the latency objective. */
  readonly shed: number;
  readonly otherFailures: number;
  readonly notSent: number;
  /** Mean latency of the answered requests at the client, against the server's own figures over the phase. */
  readonly clientMeanMs: number;
  readonly server: ServerBreakdown;
}

/**
 * Issue 18's proof: the 4x2048 MLP under open-loop arrivals that change over the run (quiet,
 * steady, then bursts at twice the saturated rate), served by three servers in turn: the default
 * `dynamic_batching {}`, the best static config (`--static-config`, e.g. `batchwise tune`'s
 * recommended.config.pbtxt), and a latency objective of 4x the batch-1 latency measured at the start.
 */
export async function runAdaptive(options: {
  model: BatchingModel;
  phaseMs: number;
  windows: WindowOptions;
  staticConfig?: string;
  log: (line: string) => void;
  name: string;
}) {
  const { model, log } = options;
  const file = await cachedModel(`mlp-${model.layers}x${model.width}`, () => mlp({ layers: model.layers, width: model.width }), log);
  const base = (delayUs: number, extra = '') =>
    fp32Config('mlp', { width: model.width, maxBatchSize: MAX_BATCH_SIZE, batching: true, delayUs, threads: THREADS }) + extra;
  const data = new Float32Array(model.width).fill(0.5);
  const request = { model: 'mlp', inputs: [{ name: 'INPUT0', datatype: 'FP32' as const, shape: [1, model.width], data }], binary: true };

  // The start of the run: batch-1 latency (c=1) and the saturated rate (c=32) on the default config.
  const defaultConfig = base(0);
  const calibration = await serve('adaptive-calibrate', file, defaultConfig, async (client) => {
    const send = async () => void (await client.infer(request));
    const one = await measure('batch 1 (c=1)', send, { concurrency: 1 }, { ...options.windows, log });
    const saturated = await measure('saturated (c=32)', send, { concurrency: 32 }, { ...options.windows, log });
    return { batch1Ms: one.latencyMs.p50, saturatedPerSecond: saturated.throughput };
  });
  const objectiveMs = Math.max(0.1, Math.round(calibration.batch1Ms * OBJECTIVE_OVER_BATCH1 * 100) / 100);
  const sat = calibration.saturatedPerSecond;
  const phases: { name: PhaseName; rate: (elapsedMs: number) => number }[] = [
    { name: 'quiet', rate: () => Math.max(5, Math.min(sat * 0.05, 1000 / (4 * calibration.batch1Ms))) },
    { name: 'steady', rate: () => sat * 0.6 },
    // Bursts of twice the saturated rate, a quarter of each period, over a steady half-rate floor.
    { name: 'burst', rate: (t) => (t % Math.max(200, options.phaseMs / 5) < Math.max(50, options.phaseMs / 20) ? sat * 2 : sat * 0.5) },
  ];
  log(
    `batch-1 latency ${calibration.batch1Ms.toFixed(2)} ms, saturated ${sat.toFixed(0)} infer/s: objective ${objectiveMs} ms; ` +
      `phases of ${options.phaseMs / 1000} s: quiet ${phases[0]!.rate(0).toFixed(0)}/s, steady ${phases[1]!.rate(0).toFixed(0)}/s, ` +
      `burst ${(sat * 2).toFixed(0)}/s in bursts over ${(sat * 0.5).toFixed(0)}/s`,
  );

  let staticConfig: string;
  let staticSource: string;
  if (options.staticConfig) {
    staticConfig = (await readFile(options.staticConfig, 'utf8')).replace(/^\s*name:\s*"[^"]*"/m, 'name: "mlp"');
    staticSource = options.staticConfig;
  } else {
    staticConfig = base(FALLBACK_STATIC_DELAY_US);
    staticSource = `no --static-config: a fixed max_queue_delay_microseconds ${FALLBACK_STATIC_DELAY_US}, max_batch_size ${MAX_BATCH_SIZE}`;
  }
  log(`static config: ${staticSource}`);
  const configs: Record<ServerName, string> = {
    default: defaultConfig,
    static: staticConfig,
    objective: base(0, `\nparameters { key: "batchwise_latency_objective_ms" value: { string_value: "${objectiveMs}" } }`),
  };

  const results = {} as Record<ServerName, Record<PhaseName, PhaseResult>>;
  for (const server of Object.keys(configs) as ServerName[]) {
    results[server] = await serve(`adaptive-${server}`, file, configs[server], async (client, httpUrl) => {
      // Warm-up at the steady rate: the objective's profile and every instance see live batches first.
      await runPhase(client, httpUrl, request, (t) => phases[1]!.rate(t), options.windows.warmupMs, objectiveMs);
      const byPhase = {} as Record<PhaseName, PhaseResult>;
      for (const phase of phases) byPhase[phase.name] = await runPhase(client, httpUrl, request, phase.rate, options.phaseMs, objectiveMs);
      return byPhase;
    });
    log(`${server}: done`);
  }

  const checks = targets(results, objectiveMs);
  const rows = phases.flatMap(({ name }) =>
    (Object.keys(results) as ServerName[]).map((server) => {
      const r = results[server][name];
      return [
        name,
        server,
        r.sent,
        r.okLatencyMs.p50,
        r.okLatencyMs.p99,
        r.goodputPerSecond,
        r.shed,
        r.otherFailures,
        r.notSent,
        r.clientMeanMs,
        r.server.avgRequestMs,
      ];
    }),
  );
  const headers = [
    'phase',
    'server',
    'sent',
    'p50 ms',
    'p99 ms',
    'goodput/s',
    'shed',
    'other fail',
    'not sent',
    'client mean ms',
    'server mean ms',
  ];
  const result = {
    model: `mlp-${model.layers}x${model.width}`,
    environment: environment(),
    calibration,
    objectiveMs,
    staticSource,
    configs,
    results,
    checks,
  };
  await reportScenario(
    {
      name: options.name,
      title: `pnpm bench adaptive: ${result.model}`,
      intro:
        `Batch-1 latency ${calibration.batch1Ms.toFixed(2)} ms, saturated ${calibration.saturatedPerSecond.toFixed(0)} infer/s, ` +
        `objective ${objectiveMs} ms (${OBJECTIVE_OVER_BATCH1}x batch 1). Static config: ${staticSource}.`,
      tables: [{ headers, rows }],
      checks,
      json: result,
    },
    log,
  );
  return result;
}

/** A server of its own for one config; the body gets a client with room for the open loop's outstanding requests. */
async function serve<T>(
  scenario: string,
  modelFile: string,
  config: string,
  body: (client: HttpClient, httpUrl: string) => Promise<T>,
): Promise<T> {
  const repo = await benchRepository(scenario, [{ name: 'mlp', modelFile, config }]);
  const server = await startServerProcess(['--model-repository', repo]);
  const client = new HttpClient({ url: server.httpUrl, connections: 256 });
  try {
    return await body(client, server.httpUrl);
  } finally {
    await client.close();
    await server.stop();
  }
}

/** One phase of open-loop arrivals; each request counts in the phase it was sent in. */
async function runPhase(
  client: HttpClient,
  httpUrl: string,
  request: Parameters<HttpClient['infer']>[0],
  rate: (elapsedMs: number) => number,
  durationMs: number,
  objectiveMs: number,
): Promise<PhaseResult> {
  const ok: number[] = [];
  let shed = 0;
  let otherFailures = 0;
  const send = async () => {
    const started = performance.now();
    await client.infer(request).then(
      () => void ok.push(performance.now() - started),
      (error: unknown) => {
        if (error instanceof BatchwiseClientError && error.httpStatus === 503 && /latency objective/.test(error.message)) shed++;
        else otherFailures++;
      },
    );
  };
  const before = await readStats(httpUrl, 'mlp');
  const { sent, notSent } = await openLoopFor(durationMs, rate, MAX_OUTSTANDING, send);
  const server = breakdown(before, await readStats(httpUrl, 'mlp'));
  const good = ok.filter((ms) => ms <= objectiveMs).length;
  const clientMeanMs = ok.length > 0 ? ok.reduce((a, b) => a + b, 0) / ok.length : 0;
  return {
    sent,
    okLatencyMs: summarize(ok),
    goodputPerSecond: good / (durationMs / 1000),
    shed,
    otherFailures,
    notSent,
    clientMeanMs,
    server,
  };
}

/** Issue 18's targets for the objective against the two static configs. */
function targets(results: Record<ServerName, Record<PhaseName, PhaseResult>>, objectiveMs: number): Check[] {
  const o = results.objective;
  const f = (n: number) => n.toFixed(2);
  const checks: Check[] = (['quiet', 'steady', 'burst'] as const).map((phase) => ({
    target: `objective: p99 of admitted requests within ${objectiveMs} ms (${phase})`,
    pass: o[phase].okLatencyMs.p99 <= objectiveMs,
    detail: `p99 ${f(o[phase].okLatencyMs.p99)} ms`,
  }));
  const steadyRef = results.static.steady.goodputPerSecond;
  checks.push({
    target: 'objective: steady goodput >= 90% of the best static config',
    pass: o.steady.goodputPerSecond >= 0.9 * steadyRef,
    detail: `${f(o.steady.goodputPerSecond)}/s vs ${f(steadyRef)}/s`,
  });
  const burstBest = Math.max(results.static.burst.goodputPerSecond, results.default.burst.goodputPerSecond);
  checks.push({
    target: 'objective: burst goodput above both static configs',
    pass: o.burst.goodputPerSecond > burstBest,
    detail: `${f(o.burst.goodputPerSecond)}/s vs static ${f(results.static.burst.goodputPerSecond)}/s, default ${f(results.default.burst.goodputPerSecond)}/s`,
  });
  const quietRef = results.default.quiet.okLatencyMs.p50;
  checks.push({
    target: 'objective: quiet p50 within 15% of the delay-0 config (the default)',
    pass: o.quiet.okLatencyMs.p50 <= 1.15 * quietRef,
    detail: `${f(o.quiet.okLatencyMs.p50)} ms vs ${f(quietRef)} ms`,
  });
  return checks;
}
