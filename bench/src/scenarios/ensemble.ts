import { cp, mkdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { HttpClient, type InferOutput, type InferResult } from '@batchwise/client';
import { identity } from '@batchwise/modelgen';
import { startServerProcess, type ServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { cpuShare, cpuSnapshot, type CpuShare } from '../cpu-usage.ts';
import { latencyThroughputSvg, measure, type LoadResult, type SendRequest, type WindowOptions } from '@batchwise/client/load';
import { environment, table, writeResult } from '../report.ts';
import { breakdown, readStats, type ServerBreakdown } from '../server-stats.ts';
import { benchRepository, cachedModel, fp32Config, inferRequest } from '../workload.ts';

/** The example repository `pnpm examples` generates; the pipeline is served from a copy of its folders. */
export const EXAMPLE_REPOSITORY = new URL('../../../examples/model_repository/', import.meta.url).pathname;
const PIPELINE = 'text_classification';
/** The pipeline's steps, in order; each hop of the client-chained variant is one HTTP binary request to one of them. */
const STEPS = ['tokenizer', 'encoder', 'classifier', 'postprocess'] as const;
/** The step whose batch size the issue sets a target for. */
const BATCHED_STEP = 'encoder';

/** The tiny model of `overhead` (16-float identity) and a one-step ensemble around it. */
const TINY = 'tiny';
const TINY_ENSEMBLE = 'tiny_ensemble';
const WIDTH = 16;

/** Sentences sent in turn: each request carries one. */
const TEXTS = [
  'I love this wonderful movie',
  'a terrible, boring waste of time',
  'The film was at the theater on Sunday.',
  'Great acting, but the plot was a boring mess.',
  'Amazing music and a delightful ending!',
];

/** The targets, each a ratio or a batch size and the bound it must meet. */
export const TARGETS = {
  throughput_ensemble_vs_chained_c16: { min: 1.5 },
  p50_ensemble_vs_chained_c1: { below: 1 },
  p50_ensemble_vs_chained_c16: { below: 1 },
  encoder_avg_batch_c16: { above: 4 },
  one_step_ensemble_vs_direct: { min: 0.9 },
} as const;
export type TargetName = keyof typeof TARGETS;

export interface EnsemblePoint {
  /** `ensemble`, `client-chained`, `direct` (the tiny model) or `one-step ensemble`. */
  readonly variant: string;
  readonly concurrency: number;
  readonly client: LoadResult;
  /** Statistics of each model involved, over the measured windows. */
  readonly server: Record<string, ServerBreakdown>;
  readonly cpu?: CpuShare;
}

export interface EnsembleResult {
  readonly points: EnsemblePoint[];
  readonly ratios: Partial<Record<TargetName, number>>;
  readonly pass: Partial<Record<TargetName, boolean>>;
  /** The server's CPU per request calling the tiny model directly over through the one-step ensemble. */
  readonly oneStepServerCpuDirectOverEnsemble?: number;
}

/**
 * `text_classification` served as an ensemble against its four steps chained by the client
 * over HTTP binary, closed loop at each concurrency, on one server process; then a one-step
 * ensemble around the tiny model against that model called directly. Each variant is measured
 * twice (ensemble, chained, chained, ensemble; direct, ensemble, ensemble, direct).
 */
export async function runEnsemble(options: {
  /** Closed-loop concurrencies of the pipeline comparison (the targets read 1 and 16). */
  concurrencies: readonly number[];
  /** Closed-loop concurrency of the one-step ensemble against the direct call. */
  tinyConcurrency: number;
  windows: WindowOptions;
  log: (line: string) => void;
  name?: string;
}): Promise<EnsembleResult> {
  const { log } = options;
  const env = environment();
  const repo = await ensembleRepository(log);
  // No grace on SIGTERM: nothing balances load here, and the run should not wait 5 s at its end.
  const server = await startServerProcess(['--model-repository', repo, '--shutdown-grace-secs', '0']);
  const points: EnsemblePoint[] = [];
  try {
    await checkSameAnswers(server.httpUrl);
    // Each pair measured A, B, B, A: this machine's speed drifts within minutes (the first run
    // read the tiny model direct falling from 2533 to 1279 infer/s across its windows while
    // other processes took 1.2-1.5 cores), and in this order a steady drift weighs on both alike.
    for (const concurrency of options.concurrencies) {
      const client = new HttpClient({ url: server.httpUrl, connections: concurrency });
      try {
        const send = { ensemble: ensembleRequest(client), 'client-chained': chainedRequest(client) };
        for (const variant of ['ensemble', 'client-chained', 'client-chained', 'ensemble'] as const) {
          points.push(await measurePoint(server, variant, concurrency, send[variant], [PIPELINE, ...STEPS], options.windows, log));
        }
      } finally {
        await client.close();
      }
    }
    const c = options.tinyConcurrency;
    for (const [variant, model] of [
      ['direct', TINY],
      ['one-step ensemble', TINY_ENSEMBLE],
      ['one-step ensemble', TINY_ENSEMBLE],
      ['direct', TINY],
    ] as const) {
      const { send, close } = inferRequest(server, 'http-binary', model, WIDTH, c);
      try {
        points.push(await measurePoint(server, variant, c, send, [TINY_ENSEMBLE, TINY], options.windows, log));
      } finally {
        await close();
      }
    }
  } catch (error) {
    const { exitCode, signalCode } = server.child;
    if (exitCode === null && signalCode === null) throw error;
    throw new Error(`the server exited during the run (code ${exitCode}, signal ${signalCode}): ${(error as Error).message}`, {
      cause: error,
    });
  } finally {
    await server.stop();
  }

  const ratios = ensembleRatios(points, options.tinyConcurrency);
  const pass = Object.fromEntries(
    Object.entries(ratios).map(([name, value]) => [name, meets(TARGETS[name as TargetName], value)]),
  ) as EnsembleResult['pass'];
  const cpuRatio = oneStepCpuRatio(points, options.tinyConcurrency);
  log(`\n${formatPoints(points)}\n`);
  for (const [name, value] of Object.entries(ratios) as [TargetName, number][]) {
    log(`${name}: ${value.toFixed(2)}  (target ${describeTarget(TARGETS[name])}) ${pass[name] ? 'PASS' : 'FAIL'}`);
  }
  if (cpuRatio !== undefined) log(`one_step_server_cpu_direct_over_ensemble: ${cpuRatio.toFixed(2)}  (server CPU per request; no target)`);
  const svg = latencyThroughputSvg(
    `${PIPELINE}: p50 latency vs throughput, ensemble vs client-chained (HTTP binary)`,
    ['ensemble', 'client-chained'].map((variant) => ({
      name: variant,
      points: options.concurrencies.map((c) => {
        const measured = pointsOf(points, variant, c);
        return {
          x: mean(measured.map((p) => p.client.throughput)) ?? 0,
          y: mean(measured.map((p) => p.client.latencyMs.p50)) ?? 0,
          label: `c=${c}`,
        };
      }),
    })),
    'p50 latency (ms)',
  );
  const result: EnsembleResult = { points, ratios, pass, ...(cpuRatio !== undefined && { oneStepServerCpuDirectOverEnsemble: cpuRatio }) };
  const files = await writeResult(options.name ?? 'ensemble', { environment: env, targets: TARGETS, ...result }, svg);
  log(`wrote ${files.join(', ')}`);
  return result;
}

/**
 * The pipeline's folders copied from the example repository (so the server loads only what is
 * measured), the tiny model, and a one-step ensemble around it.
 */
async function ensembleRepository(log: (line: string) => void): Promise<string> {
  const pipelineConfig = join(EXAMPLE_REPOSITORY, PIPELINE, 'config.pbtxt');
  await stat(pipelineConfig).catch(() => {
    throw new Error(`${pipelineConfig} is missing: run 'pnpm examples' first`);
  });
  const file = await cachedModel('identity-fp32-16', () => identity('FP32', [WIDTH]), log);
  const dir = await benchRepository('ensemble', [
    { name: TINY, modelFile: file, config: fp32Config(TINY, { width: WIDTH, maxBatchSize: 64, batching: true, delayUs: 0 }) },
  ]);
  for (const model of [PIPELINE, ...STEPS]) await cp(join(EXAMPLE_REPOSITORY, model), join(dir, model), { recursive: true });
  await mkdir(join(dir, TINY_ENSEMBLE, '1'), { recursive: true });
  await writeFile(join(dir, TINY_ENSEMBLE, 'config.pbtxt'), tinyEnsembleConfig());
  return dir;
}

function tinyEnsembleConfig(): string {
  return [
    `name: "${TINY_ENSEMBLE}"`,
    'platform: "ensemble"',
    'max_batch_size: 64',
    `input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]`,
    `output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${WIDTH} ] } ]`,
    'ensemble_scheduling { step [ {',
    `  model_name: "${TINY}" model_version: -1`,
    '  input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "OUTPUT0" }',
    '} ] }',
    '',
  ].join('\n');
}

let nextText = 0;
function text(): string {
  nextText = (nextText + 1) % TEXTS.length;
  return TEXTS[nextText]!;
}

function textInput(value: string) {
  return { name: 'text', datatype: 'BYTES', shape: [1, 1], data: [value] } as const;
}

/** One request to the ensemble: text in, labels and scores out. */
function ensembleRequest(client: HttpClient): SendRequest {
  return async () => {
    await client.infer({ model: PIPELINE, inputs: [textInput(text())], binary: true });
  };
}

/** The same pipeline, each step a separate HTTP binary request whose inputs are the last one's outputs. */
function chainedRequest(client: HttpClient): SendRequest {
  return async () => {
    await chain(client, text());
  };
}

async function chain(client: HttpClient, value: string): Promise<InferResult> {
  const tokens = await client.infer({ model: 'tokenizer', inputs: [textInput(value)], binary: true });
  const embedding = await client.infer({
    model: 'encoder',
    inputs: [asInput(output(tokens, 'input_ids')), asInput(output(tokens, 'attention_mask'))],
    binary: true,
  });
  const logits = await client.infer({ model: 'classifier', inputs: [asInput(output(embedding, 'embedding'))], binary: true });
  return client.infer({ model: 'postprocess', inputs: [asInput(output(logits, 'logits'))], binary: true });
}

function output(result: InferResult, name: string): InferOutput {
  const found = result.outputs.find((o) => o.name === name);
  if (!found) throw new Error(`${result.modelName} answered without '${name}'`);
  return found;
}

function asInput(o: InferOutput) {
  return { name: o.name, datatype: o.datatype, shape: o.shape, data: o.data };
}

/** Before measuring: both variants give the same labels for every sentence (so both do the same work). */
async function checkSameAnswers(httpUrl: string): Promise<void> {
  const client = new HttpClient({ url: httpUrl, connections: 1 });
  try {
    for (const value of TEXTS) {
      const whole = await client.infer({ model: PIPELINE, inputs: [textInput(value)], binary: true });
      const chained = await chain(client, value);
      const labels = (r: InferResult) => (output(r, 'labels').data as Uint8Array[]).map((b) => Buffer.from(b).toString()).join(',');
      if (labels(whole) !== labels(chained)) {
        throw new Error(`'${value}': the ensemble answered ${labels(whole)}, the chained steps ${labels(chained)}`);
      }
    }
  } finally {
    await client.close();
  }
}

/** One closed-loop measurement, with the statistics of `models` and the CPU over its windows. */
async function measurePoint(
  server: ServerProcess,
  variant: string,
  concurrency: number,
  send: SendRequest,
  models: readonly string[],
  windows: WindowOptions,
  log: (line: string) => void,
): Promise<EnsemblePoint> {
  const pids = [process.pid, server.child.pid!];
  const readAll = () => Promise.all(models.map((m) => readStats(server.httpUrl, m)));
  let before: Awaited<ReturnType<typeof readAll>> | undefined;
  let after: typeof before;
  let cpuBefore: ReturnType<typeof cpuSnapshot>;
  let cpuAfter: typeof cpuBefore;
  const client = await measure(
    `${variant} c=${concurrency}`,
    send,
    { concurrency },
    { ...windows, log },
    {
      onMeasureStart: async () => {
        before = await readAll();
        cpuBefore = cpuSnapshot(pids);
      },
      onMeasureEnd: async () => {
        cpuAfter = cpuSnapshot(pids);
        after = await readAll();
      },
    },
  );
  const cpu = cpuShare(cpuBefore, cpuAfter);
  const serverStats = Object.fromEntries(models.map((m, i) => [m, breakdown(before![i]!, after![i]!)]));
  return { variant, concurrency, client, server: serverStats, ...(cpu && { cpu }) };
}

/**
 * The ratios, from the points measured (a ratio whose points are missing is left out):
 * each variant's throughput and p50 are the means over its measurements at that concurrency,
 * and the encoder's mean batch pools the executions of every ensemble measurement at c=16.
 */
export function ensembleRatios(points: readonly EnsemblePoint[], tinyConcurrency: number): EnsembleResult['ratios'] {
  const throughput = (variant: string, c: number) => mean(pointsOf(points, variant, c).map((p) => p.client.throughput));
  const p50 = (variant: string, c: number) => mean(pointsOf(points, variant, c).map((p) => p.client.latencyMs.p50));
  const ratio = (a: number | undefined, b: number | undefined) => (a !== undefined && b ? a / b : undefined);
  const encoder = pointsOf(points, 'ensemble', 16).map((p) => p.server[BATCHED_STEP]!);
  const executions = encoder.reduce((sum, b) => sum + b.executions, 0);
  const ratios = {
    throughput_ensemble_vs_chained_c16: ratio(throughput('ensemble', 16), throughput('client-chained', 16)),
    p50_ensemble_vs_chained_c1: ratio(p50('ensemble', 1), p50('client-chained', 1)),
    p50_ensemble_vs_chained_c16: ratio(p50('ensemble', 16), p50('client-chained', 16)),
    encoder_avg_batch_c16: executions > 0 ? encoder.reduce((sum, b) => sum + b.avgBatchSize * b.executions, 0) / executions : undefined,
    one_step_ensemble_vs_direct: ratio(throughput('one-step ensemble', tinyConcurrency), throughput('direct', tinyConcurrency)),
  };
  return Object.fromEntries(Object.entries(ratios).filter(([, v]) => v !== undefined)) as EnsembleResult['ratios'];
}

/** Beside the targets: the server's CPU per request of the direct call over the one-step ensemble's (1: the ensemble costs nothing). */
export function oneStepCpuRatio(points: readonly EnsemblePoint[], tinyConcurrency: number): number | undefined {
  const cpu = (variant: string) => mean(pointsOf(points, variant, tinyConcurrency).map(serverCpuMsPerRequest));
  const [direct, oneStep] = [cpu('direct'), cpu('one-step ensemble')];
  return direct && oneStep ? direct / oneStep : undefined;
}

function pointsOf(points: readonly EnsemblePoint[], variant: string, concurrency: number): EnsemblePoint[] {
  return points.filter((p) => p.variant === variant && p.concurrency === concurrency);
}

/** The mean, or undefined when there is nothing (or something unknown) to average. */
function mean(values: readonly (number | undefined)[]): number | undefined {
  if (values.length === 0 || values.some((v) => v === undefined)) return undefined;
  return (values as number[]).reduce((a, b) => a + b, 0) / values.length;
}

/**
 * The server's CPU time per request (its worker threads and ONNX Runtime's included): unlike
 * throughput, it hardly depends on how much of the shared cores the client and others take.
 */
export function serverCpuMsPerRequest(p: EnsemblePoint): number | undefined {
  const cores = p.cpu?.pidCores[1];
  return cores === undefined || p.client.throughput === 0 ? undefined : (cores * 1000) / p.client.throughput;
}

type Target = { min: number } | { below: number } | { above: number };

function meets(target: Target, value: number): boolean {
  if ('min' in target) return value >= target.min;
  if ('below' in target) return value < target.below;
  return value > target.above;
}

function describeTarget(target: Target): string {
  return 'min' in target ? `>= ${target.min}` : 'below' in target ? `< ${target.below}` : `> ${target.above}`;
}

function formatPoints(points: readonly EnsemblePoint[]): string {
  return table(
    [
      'variant',
      'load',
      'infer/s',
      'p50 ms',
      'p99 ms',
      'errors',
      'batch: encoder | tiny',
      'tokenizer batch',
      'postprocess batch',
      'server cpu ms/req',
      'own cpu',
      'other cpu',
    ],
    points.map((p) => [
      p.variant,
      `c=${p.concurrency}`,
      p.client.throughput,
      p.client.latencyMs.p50,
      p.client.latencyMs.p99,
      p.client.errors,
      p.server[BATCHED_STEP]?.avgBatchSize ?? p.server[TINY]?.avgBatchSize ?? '',
      p.server['tokenizer']?.avgBatchSize ?? '',
      p.server['postprocess']?.avgBatchSize ?? '',
      serverCpuMsPerRequest(p)?.toFixed(3) ?? '',
      p.cpu?.ownCores ?? '',
      p.cpu?.otherCores ?? '',
    ]),
  );
}
