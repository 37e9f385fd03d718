/**
 * One WebGPU execution's time under each session setting that could take out what is not the
 * model's arithmetic (issue 45): validation, the buffer caches, graph capture, how many dispatches
 * wait before a flush, outputs left on the GPU, and the same session on a 2x64 MLP (what an
 * execution costs with next to no arithmetic). Each variant runs in a child process of its own:
 * Dawn's device is the process's, its first session's settings win, and a failure can take the
 * process with it. Every variant's answers are compared with ONNX Runtime's CPU run for batches
 * 1, 16, 64 and 1 again (a captured graph replayed for another shape would show there).
 */
import ort from 'onnxruntime-node';
import { mulberry32, uniformFloat32 } from '@batchwise/modelgen/prng';
import type { SessionSettings } from '@batchwise/server/backends/backend.ts';
import { ortSessionOptions } from '@batchwise/server/backends/onnxruntime/session-options.ts';
import { sessionSettingsFromConfig } from '@batchwise/server/backends/session-settings.ts';
import { runChildForVerdict } from './child-verdict.ts';
import { compareWithin } from './tolerance.ts';

export interface WebGpuVariant {
  readonly name: string;
  /** The `webgpu` accelerator's parameters, as a model's config gives them (config/execution-accelerators.ts). */
  readonly accelerator?: Readonly<Record<string, string>>;
  /** The model's own parameters (`session.*` session config entries). */
  readonly modelParameters?: Readonly<Record<string, string>>;
  /** Session config entries no config parameter sets (graph capture: a captured graph cannot serve batches of other sizes). */
  readonly entries?: Readonly<Record<string, string>>;
  /** Session options beside the server's (onnxruntime-node's own, e.g. preferredOutputLocation). */
  readonly sessionOptions?: Readonly<Record<string, unknown>>;
  /** The check's MLP, or the 2x64 probe MLP: an execution's cost without the arithmetic. */
  readonly model: 'mlp' | 'probe';
}

export const WEBGPU_VARIANTS: readonly WebGpuVariant[] = [
  { name: 'as the server serves it', model: 'mlp' },
  { name: 'the 2x64 probe MLP, as served', model: 'probe' },
  { name: 'validation_mode disabled', accelerator: { validation_mode: 'disabled' }, model: 'mlp' },
  { name: 'validation_mode wgpuOnly', accelerator: { validation_mode: 'wgpuOnly' }, model: 'mlp' },
  { name: 'storage_buffer_cache_mode simple', accelerator: { storage_buffer_cache_mode: 'simple' }, model: 'mlp' },
  { name: 'max_num_pending_dispatches 1', accelerator: { max_num_pending_dispatches: '1' }, model: 'mlp' },
  { name: 'max_num_pending_dispatches 256', accelerator: { max_num_pending_dispatches: '256' }, model: 'mlp' },
  { name: 'graph capture (fixed shapes only)', entries: { 'ep.webgpuexecutionprovider.enableGraphCapture': '1' }, model: 'mlp' },
  { name: 'outputs left on the GPU (no read-back)', sessionOptions: { preferredOutputLocation: 'gpu-buffer' }, model: 'mlp' },
  { name: 'intra-op spinning on (server default off)', modelParameters: { 'session.intra_op.allow_spinning': '1' }, model: 'mlp' },
];

/** The variant's settings as the server makes them from a model config with its parameters, plus its own entries. */
export function variantSettings(variant: WebGpuVariant): SessionSettings {
  const settings = sessionSettingsFromConfig({
    name: 'variant',
    max_batch_size: 0,
    input: [],
    output: [],
    optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'webgpu', parameters: { ...variant.accelerator } }] } },
    parameters: Object.fromEntries(Object.entries(variant.modelParameters ?? {}).map(([k, v]) => [k, { string_value: v }])),
  });
  return variant.entries ? { ...settings, sessionConfigEntries: { ...settings.sessionConfigEntries, ...variant.entries } } : settings;
}

/** Whether a model config can ask for what `variant` sets: then the check can serve it. */
export function servable(variant: WebGpuVariant): boolean {
  return variant.model === 'mlp' && !variant.entries && !variant.sessionOptions && Boolean(variant.accelerator ?? variant.modelParameters);
}

export interface VariantResult {
  readonly name: string;
  readonly ok: boolean;
  readonly error?: string;
  readonly createMs?: number;
  /** Median, fastest and 90th percentile of session.run, by batch size. */
  readonly runs?: Readonly<Record<number, { medianMs: number; minMs: number; p90Ms: number; count: number }>>;
  /** Worst difference over batches 1, 16, 64, 1 as a share of the tolerance; undefined when outputs stayed on the GPU. */
  readonly worst?: number;
}

const BATCHES = [1, 16, 64] as const;
const MARK = 'gpu-check-variant:';

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

/** The child's side: one variant in this process, its verdict on stdout after MARK. */
export async function measureVariantHere(
  modelFile: string,
  width: number,
  variant: WebGpuVariant,
  runs: number,
  device: 'gpu' | 'cpu',
): Promise<void> {
  let result: VariantResult;
  try {
    const options = {
      ...ortSessionOptions(variantSettings(variant), device, 0),
      ...variant.sessionOptions,
    } as ort.InferenceSession.SessionOptions;
    const t0 = performance.now();
    const session = await ort.InferenceSession.create(modelFile, options);
    const createMs = performance.now() - t0;
    const cpu = await ort.InferenceSession.create(modelFile, { executionProviders: ['cpu'] });
    const feeds = new Map(
      BATCHES.map((b) => [b, { INPUT0: new ort.Tensor('float32', uniformFloat32(mulberry32(100 + b), b * width, 1), [b, width]) }]),
    );
    const onHost = variant.sessionOptions?.['preferredOutputLocation'] === undefined;
    let worst = 0;
    for (const b of [1, 16, 64, 1] as const) {
      const got = await session.run(feeds.get(b)!);
      const output = Object.values(got)[0]!;
      if (onHost) {
        const expected = Object.values(await cpu.run(feeds.get(b)!))[0]!;
        worst = Math.max(worst, compareWithin(output.data as Float32Array, expected.data as Float32Array).worst);
      } else {
        output.dispose();
      }
    }
    const timed: Record<number, { medianMs: number; minMs: number; p90Ms: number; count: number }> = {};
    for (const b of BATCHES) {
      const count = b === 1 ? runs : Math.max(10, Math.floor(runs / 4));
      const times: number[] = [];
      for (let i = 0; i < count + 3; i++) {
        const start = performance.now();
        const got = await session.run(feeds.get(b)!);
        const elapsed = performance.now() - start;
        if (i >= 3) times.push(elapsed);
        if (!onHost) for (const t of Object.values(got)) t.dispose();
      }
      times.sort((x, y) => x - y);
      timed[b] = { medianMs: quantile(times, 0.5), minMs: times[0]!, p90Ms: quantile(times, 0.9), count };
    }
    await session.release();
    await cpu.release();
    result = { name: variant.name, ok: true, createMs, runs: timed, ...(onHost && { worst }) };
  } catch (error) {
    result = { name: variant.name, ok: false, error: (error as Error).message.slice(0, 500) };
  }
  process.stdout.write(`\n${MARK}${JSON.stringify(result)}\n`);
}

/** Runs `variant` in a child of `entry` (the check, called with --webgpu-variant) and returns its verdict. */
export async function runVariant(
  entry: string,
  modelFiles: { mlp: string; probe: string; mlpWidth: number; probeWidth: number },
  variant: WebGpuVariant,
  runs: number,
  device: 'gpu' | 'cpu',
  timeoutMs: number,
): Promise<VariantResult> {
  const [file, width] = variant.model === 'mlp' ? [modelFiles.mlp, modelFiles.mlpWidth] : [modelFiles.probe, modelFiles.probeWidth];
  const child = await runChildForVerdict<VariantResult>(
    [entry, '--webgpu-variant', file, String(width), String(runs), device, JSON.stringify(variant)],
    MARK,
    timeoutMs,
  );
  return (
    child.verdict ?? {
      name: variant.name,
      ok: false,
      error: `exited (${child.ended}) without a verdict: ${child.log.trim().split('\n').slice(-3).join(' | ').slice(0, 400)}`,
    }
  );
}

/** The markdown table of the variants' results, the first row the baseline the others are set against. */
export function variantTable(results: readonly VariantResult[]): string[] {
  const base = results[0]?.runs?.[1]?.medianMs;
  const cell = (r: VariantResult, b: number) => {
    const t = r.runs?.[b];
    return t ? `${t.medianMs.toFixed(3)} (${t.minMs.toFixed(3)}-${t.p90Ms.toFixed(3)})` : '';
  };
  return [
    '| variant | batch 1: median ms (fastest-p90) | vs the first | batch 16 | batch 64 | answers (worst / tolerance) | session create ms |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...results.map((r) =>
      r.ok
        ? `| ${r.name} | ${cell(r, 1)} | ${base ? `x${(r.runs![1]!.medianMs / base).toFixed(2)}` : ''} | ${cell(r, 16)} | ${cell(r, 64)} | ${r.worst === undefined ? 'left on the GPU' : `${r.worst.toFixed(3)}${r.worst > 1 ? ' WRONG' : ''}`} | ${r.createMs?.toFixed(0) ?? ''} |`
        : `| ${r.name} | FAILED: ${(r.error ?? '').replaceAll('|', '\\|').replaceAll('\n', ' ')} | | | | | |`,
    ),
  ];
}

/**
 * The fastest variant a model config can ask for, with right answers, at least 10% under the
 * baseline's batch-1 median (the first result): the check serves it as `mlp_gpu_best`.
 */
export function fastestServable(results: readonly VariantResult[]): WebGpuVariant | undefined {
  const base = results[0]?.runs?.[1]?.medianMs;
  if (base === undefined) return undefined;
  const named = (r: VariantResult) => WEBGPU_VARIANTS.find((v) => v.name === r.name);
  const best = fastestAtBatchOne(results, (r) => {
    const v = named(r);
    return r.worst !== undefined && r.worst <= 1 && r.runs![1]!.medianMs <= 0.9 * base && v !== undefined && servable(v);
  });
  return best && named(best);
}

/** Of the results that ran and that `accept` takes, the one with the lowest batch-1 median. */
function fastestAtBatchOne(results: readonly VariantResult[], accept: (r: VariantResult) => boolean): VariantResult | undefined {
  return results
    .filter((r) => r.ok && r.runs?.[1] !== undefined && accept(r))
    .sort((a, b) => a.runs![1]!.medianMs - b.runs![1]!.medianMs)[0];
}

/**
 * One line: batch 1 as served, the probe's (the cost with next to no arithmetic), the fastest variant
 * whose answers are right (or were left on the GPU, unchecked), and those that failed. The first two
 * results are the baseline and the probe, as WEBGPU_VARIANTS orders them.
 */
export function variantSummary(results: readonly VariantResult[]): string {
  const ms = (r: VariantResult | undefined) => r?.runs?.[1]?.medianMs.toFixed(3) ?? '?';
  // The probe (second) has next to no arithmetic: it is a floor, not a setting.
  const fastest = fastestAtBatchOne(
    results.filter((_, i) => i !== 1),
    (r) => r.worst === undefined || r.worst <= 1,
  );
  const failed = results.filter((r) => !r.ok).map((r) => r.name);
  const wrong = results.filter((r) => r.worst !== undefined && r.worst > 1).map((r) => r.name);
  return [
    `batch 1 as served ${ms(results[0])} ms; 2x64 probe ${ms(results[1])} ms`,
    `fastest with right answers: ${fastest ? `${fastest.name} ${ms(fastest)} ms` : 'none'}`,
    ...(wrong.length ? [`WRONG answers: ${wrong.join(', ')}`] : []),
    `failed: ${failed.join(', ') || 'none'}`,
  ].join('; ');
}
