import { cp, mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { HttpClient } from '@batchwise/client';
import type { Logger } from 'pino';
import { visibleGpus } from '../../backends/gpu-detect.ts';
import { modelConfigFromProtobufJson } from '../../config/from-json.ts';
import type { ModelConfig } from '../../config/model-config.ts';
import { parseModelConfig } from '../../config/parse.ts';
import { printModelConfig } from '../../config/print.ts';
import { createModelSource } from '../../repository/create-model-source.ts';
import type { ModelFolder } from '../../repository/model-folder.ts';
import { startServerProcess } from '../server-process.ts';
import { applyKnobs, candidateId, currentCandidateId, knobsCost, knobsOf, searchStages, type Host, type Knobs } from './candidates.ts';
import { describeLevel, explainMiss, hostWarnings, smallHostWarning, type Miss } from './explain.ts';
import { paretoFront, recommend, scoreWithin, type OperatingPoint, type Recommendation } from './pareto.ts';
import type { Progress } from './progress.ts';
import { requestInputs } from './inputs.ts';
import { loadError, pointsOf, runCandidate, type CandidateRun, type LevelResult, type MeasurePlan } from './run-candidate.ts';

export interface TuneOptions {
  /** Local folder or s3:// location, as `serve` takes it. */
  readonly repository: string;
  readonly model: string;
  readonly plan: MeasurePlan;
  /** Total time for the sweep; no candidate starts that would end past it (by the average so far). */
  readonly budgetMs: number;
  /** Stop after this many candidates, the current config included. @default - no limit */
  readonly maxCandidates?: number;
  readonly logger: Logger;
  readonly progress: Progress;
  /** @default - this machine: its CPU cores and visible GPUs */
  readonly host?: Host;
}

export interface TuneResult {
  readonly model: string;
  readonly repository: string;
  readonly objectiveMs: number;
  readonly budgetMs: number;
  readonly host: Host;
  readonly plan: MeasurePlan;
  readonly startedAt: string;
  readonly durationMs: number;
  /** Every candidate in the order measured; the first is the current config. */
  readonly runs: readonly CandidateRun[];
  /** Candidates the search proposed but the budget (or --max-candidates) left unmeasured. */
  readonly skipped: readonly string[];
  readonly front: readonly OperatingPoint[];
  /** The best point within the objective or, when none met it, the nearest (`withinObjective: false`). */
  readonly recommendation?: Recommendation;
  /** When nothing met the objective: by how much the nearest point missed it, and why. */
  readonly miss?: Miss;
  /** What about the host makes the client's figures differ from the server's (e.g. the generator saturating the cores). */
  readonly warnings: readonly string[];
  /** config.pbtxt as it is, and as recommended (the current text when the current config wins; the nearest when none met the objective). */
  readonly currentConfigText: string;
  readonly recommendedConfigText?: string;
  /** The served version's model file as tune read it (for S3: in the download cache); what `models promote --file` ships. */
  readonly modelFile?: string;
  /**
   * The current config's best point within the objective against the recommended config's best
   * point at an equal or lower p99: the "x times the throughput at the same latency" figure.
   */
  readonly comparison?: { readonly current: OperatingPoint; readonly recommended: OperatingPoint; readonly throughputRatio: number };
}

/** The machine `tune` runs on, the one it tunes for. */
export function thisHost(): Host {
  return { cpuCores: availableParallelism(), gpuCount: visibleGpus().length };
}

/** The model's folder as a local copy (an S3 model is downloaded first); throws naming the models there when it is missing. */
async function localizeModel(repository: string, model: string, logger: Logger): Promise<ModelFolder> {
  const source = createModelSource(repository, { logger });
  const listed = await source.listModels();
  const found = listed.find((m) => m.name === model);
  if (!found) {
    const names = listed.map((m) => m.name).join(', ') || 'none';
    throw new Error(`model '${model}' is not in ${repository} (models there: ${names})`);
  }
  return found.localize();
}

/** Starts the current config once to read the config as the server completed it (inputs, max_batch_size). */
async function effectiveConfig(repositoryDir: string, model: string): Promise<ModelConfig> {
  const server = await startServerProcess(['--model-repository', repositoryDir]);
  try {
    const client = new HttpClient({ url: server.httpUrl });
    try {
      if (!(await client.isModelReady(model))) {
        throw new Error(`the server cannot load '${model}' with its current config${loadError(server)}; fix that before tuning`);
      }
      return modelConfigFromProtobufJson(await client.modelConfig(model)) as unknown as ModelConfig;
    } finally {
      await client.close();
    }
  } finally {
    await server.stop();
  }
}

/**
 * Measures the current config, then searches one dimension at a time from the best so far
 * (searchStages), within the budget, and recommends the highest-throughput config whose p99
 * stays within the objective or, when none does, the nearest, saying by how much it missed and why.
 */
export async function tune(options: TuneOptions): Promise<TuneResult> {
  const { model, plan, logger, progress } = options;
  const startedAt = new Date();
  const t0 = performance.now();
  const host = options.host ?? thisHost();
  const folder = await localizeModel(options.repository, model, logger);
  const work = await mkdtemp(join(tmpdir(), 'batchwise-tune-'));
  const repositoryDir = join(work, 'repo');
  try {
    await cp(folder.dir, join(repositoryDir, model), { recursive: true });
    progress.update(0, `reading the config of '${model}' as the server completes it`);
    const effective = await effectiveConfig(repositoryDir, model);
    const currentConfigText = folder.configText ?? printModelConfig(effective);
    const base = folder.configText !== undefined ? parseModelConfig(folder.configText) : effective;
    const inputs = requestInputs(effective);
    const small = smallHostWarning(host.cpuCores);
    if (small) progress.line(`warning: ${small}`);

    const runs: CandidateRun[] = [];
    const skipped: string[] = [];
    const seen = new Set<string>();
    const measured = () => runs.flatMap(pointsOf);
    const elapsed = () => performance.now() - t0;
    const ctx = {
      repositoryDir,
      model,
      inputs,
      plan,
      measured,
      onLevel: (id: string, l: LevelResult) =>
        progress.line(
          `  ${id} c=${l.concurrency}: ${l.throughput.toFixed(1)} infer/s${l.errors ? `, ${l.errors} errors` : ''}; ${describeLevel(l)}`,
        ),
    };
    const score = (run: CandidateRun) => scoreWithin(pointsOf(run), plan.objectiveMs);

    const tryCandidate = async (
      knobs: Knobs,
      stage: string,
      configText: string,
      id = candidateId(knobs),
    ): Promise<CandidateRun | undefined> => {
      if (seen.has(id)) return runs.find((r) => r.id === id);
      seen.add(id);
      const average = runs.length > 0 ? runs.reduce((a, r) => a + r.durationMs, 0) / runs.length : 0;
      const full = options.maxCandidates !== undefined && runs.length >= options.maxCandidates;
      if (runs.length > 0 && (full || elapsed() + average > options.budgetMs)) {
        skipped.push(id);
        return undefined;
      }
      progress.update(elapsed() / options.budgetMs, `candidate ${runs.length + 1} (${stage}): ${id}`);
      const run = await runCandidate({ id, stage, knobs, configText }, ctx);
      runs.push(run);
      logger.info(
        { candidate: id, stage, status: run.status, error: run.error, durationMs: Math.round(run.durationMs) },
        'candidate measured',
      );
      progress.line(`${id}: ${run.status}${run.error ? ` (${run.error})` : ''}, best within objective ${score(run).toFixed(1)} infer/s`);
      return run;
    };

    const currentKnobs = knobsOf(base, effective);
    let best = (await tryCandidate(currentKnobs, 'current', currentConfigText, currentCandidateId(currentKnobs, effective)))!;
    for (const stage of searchStages(host, Math.max(...plan.concurrencies))) {
      for (const knobs of stage.variants(best.knobs)) {
        const run = await tryCandidate(knobs, stage.name, printModelConfig(applyKnobs(base, knobs)));
        if (run && run.status !== 'failed' && score(run) > score(best)) best = run;
      }
    }
    progress.done();

    const points = runs.filter((r) => r.status !== 'failed').flatMap(pointsOf);
    const byId = new Map(runs.map((r) => [r.id, r]));
    const recommendation = recommend(points, {
      objectiveMs: plan.objectiveMs,
      tieTolerance: 0.03,
      cost: (id) => knobsCost(byId.get(id)!.knobs, host),
    });
    const winner = recommendation && byId.get(recommendation.point.candidate)!;
    const recommendedConfigText = winner && (winner === runs[0] ? currentConfigText : printModelConfig(applyKnobs(base, winner.knobs)));
    const winnerLevel = recommendation && winner!.levels.find((l) => l.concurrency === recommendation.point.concurrency)!;
    return {
      model,
      repository: options.repository,
      objectiveMs: plan.objectiveMs,
      budgetMs: options.budgetMs,
      host,
      plan,
      startedAt: startedAt.toISOString(),
      durationMs: elapsed(),
      runs,
      skipped,
      front: paretoFront(points),
      ...(recommendation && { recommendation }),
      ...(recommendation?.withinObjective === false && { miss: explainMiss(winnerLevel!, plan.objectiveMs) }),
      warnings: hostWarnings(runs),
      currentConfigText,
      ...(recommendedConfigText !== undefined && { recommendedConfigText }),
      ...(folder.versions.length > 0 && {
        modelFile: join(folder.dir, String(Math.max(...folder.versions)), base.default_model_filename || 'model.onnx'),
      }),
      ...(recommendation?.withinObjective && compare(pointsOf(runs[0]!), pointsOf(winner!), plan.objectiveMs)),
    };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

function compare(current: OperatingPoint[], recommended: OperatingPoint[], objectiveMs: number): Pick<TuneResult, 'comparison'> {
  const within = current.filter((p) => p.p99Ms <= objectiveMs).sort((a, b) => b.throughput - a.throughput)[0];
  if (!within) return {};
  const rec = recommended.filter((p) => p.p99Ms <= within.p99Ms).sort((a, b) => b.throughput - a.throughput)[0];
  if (!rec) return {};
  return { comparison: { current: within, recommended: rec, throughputRatio: rec.throughput / within.throughput } };
}
