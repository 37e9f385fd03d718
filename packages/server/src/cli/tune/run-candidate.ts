import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { HttpClient, type InferInput } from '@batchwise/client';
import { measure, type WindowOptions } from '@batchwise/client/load';
import { startServerProcess, type ServerProcess } from '../server-process.ts';
import type { Knobs } from './candidates.ts';
import { levelFigures, type LevelFigures } from './level-figures.ts';
import { clearlyDominated, type OperatingPoint } from './pareto.ts';

/** One concurrency of one candidate: the client's figures, and the server's and the host's over the same windows. */
export interface LevelResult extends LevelFigures {
  readonly concurrency: number;
  readonly throughput: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly requests: number;
  readonly errors: number;
  readonly firstError?: string;
}

export type CandidateStatus =
  /** Every concurrency level was measured. */
  | 'measured'
  /** Stopped: another candidate beat it clearly at the same concurrency. */
  | 'dominated'
  /** Stopped: p99 passed twice the objective, and more concurrency only adds queueing. */
  | 'past-objective'
  /** The server did not load the model with this config, or no request succeeded. */
  | 'failed';

export interface CandidateRun {
  readonly id: string;
  /** The search stage that proposed it (`current` for the config as it is). */
  readonly stage: string;
  readonly knobs: Knobs;
  readonly status: CandidateStatus;
  readonly error?: string;
  readonly levels: readonly LevelResult[];
  readonly durationMs: number;
}

export interface MeasurePlan {
  /** Closed-loop concurrencies, rising. */
  readonly concurrencies: readonly number[];
  readonly windows: WindowOptions;
  readonly objectiveMs: number;
  /** Relative throughput margin for "clearly dominated" (see pareto.ts). */
  readonly dominanceMargin: number;
}

export interface CandidateSpec {
  readonly id: string;
  readonly stage: string;
  readonly knobs: Knobs;
  readonly configText: string;
}

export interface RunContext {
  /** The temporary repository holding the model; its config.pbtxt is rewritten for each candidate. */
  readonly repositoryDir: string;
  readonly model: string;
  readonly inputs: readonly InferInput[];
  readonly plan: MeasurePlan;
  /** Points of the candidates measured before, for early stopping. */
  readonly measured: () => readonly OperatingPoint[];
  readonly onLevel: (candidate: string, level: LevelResult) => void;
}

/** `: <message>` of the server's first error log (why a model did not load), or ''. */
export function loadError(server: ServerProcess): string {
  const msg = server.logs.find((l) => typeof l['level'] === 'number' && l['level'] >= 50)?.['msg'];
  return msg === undefined ? '' : `: ${String(msg)}`;
}

export function pointsOf(run: CandidateRun): OperatingPoint[] {
  return run.levels
    .filter((l) => l.requests > l.errors)
    .map((l) => ({ candidate: run.id, concurrency: l.concurrency, throughput: l.throughput, p99Ms: l.p99Ms }));
}

/**
 * Serves the model with one candidate config in a fresh `batchwise serve` child process on
 * loopback, drives it with the closed-loop load generator at rising concurrency, and stops
 * early once the candidate is clearly dominated or past the objective. Always stops the server.
 */
export async function runCandidate(spec: CandidateSpec, ctx: RunContext): Promise<CandidateRun> {
  const started = performance.now();
  const done = (status: CandidateStatus, levels: LevelResult[], error?: string): CandidateRun => ({
    id: spec.id,
    stage: spec.stage,
    knobs: spec.knobs,
    status,
    ...(error !== undefined && { error }),
    levels,
    durationMs: performance.now() - started,
  });
  await writeFile(join(ctx.repositoryDir, ctx.model, 'config.pbtxt'), spec.configText);
  let server: ServerProcess;
  try {
    server = await startServerProcess(['--model-repository', ctx.repositoryDir]);
  } catch (error) {
    return done('failed', [], (error as Error).message.slice(0, 1000));
  }
  const top = Math.max(...ctx.plan.concurrencies);
  const client = new HttpClient({ url: server.httpUrl, connections: top });
  const levels: LevelResult[] = [];
  try {
    if (!(await client.isModelReady(ctx.model))) {
      return done('failed', [], `the server did not load '${ctx.model}' with this config${loadError(server)}`);
    }
    const send = async () => void (await client.infer({ model: ctx.model, inputs: ctx.inputs }));
    for (const [index, concurrency] of ctx.plan.concurrencies.entries()) {
      const figures = levelFigures(server, ctx.model);
      const r = await measure(`${spec.id} c=${concurrency}`, send, { concurrency }, ctx.plan.windows, figures);
      const level: LevelResult = {
        concurrency,
        throughput: r.throughput,
        p50Ms: r.latencyMs.p50,
        p90Ms: r.latencyMs.p90,
        p99Ms: r.latencyMs.p99,
        requests: r.requests,
        errors: r.errors,
        ...(r.firstError !== undefined && { firstError: r.firstError }),
        ...figures.figures(),
      };
      levels.push(level);
      ctx.onLevel(spec.id, level);
      if (r.requests === 0) {
        return done(
          'failed',
          levels,
          `no response completed within the measured windows at concurrency ${concurrency}: latency is above --window-ms`,
        );
      }
      if (r.requests === r.errors) return done('failed', levels, `no request succeeded at concurrency ${concurrency}: ${r.firstError}`);
      if (level.p99Ms > 2 * ctx.plan.objectiveMs) return done('past-objective', levels);
      const point = { candidate: spec.id, concurrency, throughput: level.throughput, p99Ms: level.p99Ms };
      // The first two levels say little: a batcher shows its worth under concurrency, and at c=1
      // and 2 one window's throughput moves by 15% or more on a shared host.
      if (index >= 2 && clearlyDominated(point, ctx.measured(), ctx.plan.dominanceMargin)) return done('dominated', levels);
    }
    return done('measured', levels);
  } finally {
    await client.close();
    await server.stop();
  }
}
