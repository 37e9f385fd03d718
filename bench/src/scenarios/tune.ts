import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { mlp } from '@batchwise/modelgen';
import { describeLevel, missedBy } from '../../../packages/server/src/cli/tune/explain.ts';
import type { TuneResult } from '../../../packages/server/src/cli/tune/index.ts';
import { recommendedLevel } from '../../../packages/server/src/cli/tune/report.ts';
import { environment, writeResult } from '../report.ts';
import { benchRepository, cachedModel, CACHE_DIR } from '../workload.ts';
import type { BatchingModel } from './batching.ts';

/** The repository root, where `pnpm batchwise` runs. */
const ROOT = new URL('../../../', import.meta.url).pathname;
const CLI = join(ROOT, 'packages/server/src/cli/main.ts');

export interface TuneOptions {
  readonly model: BatchingModel;
  readonly objective: string;
  readonly budget: string;
  /**
   * The config tune starts from: `dynamic_batching { }` (issue 18's default) or `plain`, the same
   * model with batching off (Triton's out-of-the-box config without dynamic_batching: every
   * request runs alone; Batchwise needs the parameter, as it turns batching on by default).
   * @default 'dynamic'
   */
  readonly start?: 'dynamic' | 'plain';
  /** Extra `batchwise tune` flags (smoke: short windows, few candidates). */
  readonly extraArgs: readonly string[];
  readonly log: (line: string) => void;
  readonly name: string;
}

/**
 * Where a tune scenario's report lands: `<dir>/recommended.config.pbtxt` is the best static config
 * `pnpm bench adaptive` compares against (`tuneOutputDir('tune')` after `pnpm bench tune`).
 */
export function tuneOutputDir(name: string): string {
  return join(CACHE_DIR, 'tune', name);
}

/** The targets of issue 18: at least this many times the default's throughput at an equal or lower p99 ... */
const MIN_RATIO = 1.5;
/** ... in under this long. */
const MAX_DURATION_MS = 10 * 60_000;

/**
 * `batchwise tune` on the MLP with the default config (`dynamic_batching {}`), exactly as a user
 * runs it (the CLI in a child process), then the targets checked: PASS or MISS for each.
 */
export async function runTune(options: TuneOptions): Promise<{ pass: boolean }> {
  const { model, log } = options;
  const modelName = `mlp_${model.layers}x${model.width}`;
  const file = await cachedModel(modelName, () => mlp({ layers: model.layers, width: model.width }), log);
  const repo = await benchRepository(options.name, [
    {
      name: modelName,
      modelFile: file,
      config: [
        `name: "${modelName}"`,
        'max_batch_size: 64',
        `input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${model.width} ] } ]`,
        `output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${model.width} ] } ]`,
        ...(options.start === 'plain'
          ? ['parameters { key: "batchwise_dynamic_batching" value: { string_value: "false" } }']
          : ['dynamic_batching { }']),
        '',
      ].join('\n'),
    },
  ]);
  const out = tuneOutputDir(options.name);
  const args = [
    'tune',
    '--model-repository',
    repo,
    '--model',
    modelName,
    '--latency-objective',
    options.objective,
    '--budget',
    options.budget,
    '--out',
    out,
    ...options.extraArgs,
  ];
  log(`pnpm batchwise ${args.join(' ')}`);
  const started = performance.now();
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], { cwd: ROOT, stdio: 'inherit' });
    child.once('exit', resolve);
  });
  const wallMs = performance.now() - started;
  const report = JSON.parse(await readFile(join(out, 'report.json'), 'utf8')) as TuneResult;
  const ratio = report.comparison?.throughputRatio ?? 0;
  const checks = [
    {
      target: `a config with >= ${MIN_RATIO}x the ${options.start === 'plain' ? 'unbatched' : 'default'} config's throughput at an equal or lower p99`,
      pass: code === 0 && ratio >= MIN_RATIO,
      got: `${ratio.toFixed(2)}x`,
    },
    { target: 'the run takes under 10 minutes', pass: wallMs < MAX_DURATION_MS, got: `${(wallMs / 60_000).toFixed(1)} min` },
  ];
  for (const c of checks) log(`${c.pass ? 'PASS' : 'MISS'}  ${c.target}: ${c.got}`);
  // Beside the checks: the client's figures, the server's own and the CPU the generator took from it on this host.
  const rec = report.recommendation;
  if (rec)
    log(
      `${rec.withinObjective ? 'recommended' : 'nearest'} ${rec.point.candidate} c=${rec.point.concurrency}: ${describeLevel(recommendedLevel(report))}`,
    );
  if (report.miss) log(`missed the objective by ${missedBy(report.miss)}: ${report.miss.why}`);
  const files = await writeResult(options.name, { environment: environment(), wallMs, exitCode: code, checks, report });
  log(`report: ${join(out, 'report.md')}, ${join(out, 'pareto.svg')}; results: ${files.join(', ')}`);
  return { pass: checks.every((c) => c.pass) };
}
