/**
 * The GPU check (issues 38 and 45), run from its pack by run.sh on a host with an NVIDIA GPU: serves a
 * KIND_GPU MLP on ONNX Runtime's WebGPU provider (Dawn on Vulkan) and records, in one markdown file:
 * (a) its answers against ONNX Runtime's CPU run of the same model in this process, (b) nvidia-smi
 * showing the server's process, (c) the nv_gpu_* metrics, (d) the batching gain at 16 clients,
 * (f) WebGPU against the same MLP served KIND_CPU on the host's cores as `batchwise tune` configures
 * it (throughput at 16 clients, one execution at batch 1 from the server's statistics), (g) ONNX
 * Runtime's profile of one WebGPU execution in this process, (g0) one execution's time under each
 * WebGPU session setting that could cut what is not arithmetic (webgpu-variants.ts), (h) the same
 * MLP in PyTorch on CUDA through the Python backend (Triton's DLPack API), (i) third-party ONNX
 * models (PaddleOCR's, from the pack) KIND_GPU and KIND_CPU against ONNX Runtime's CPU run, (e)
 * --model-gpu-memory-limit evicting and refusing beside the GPU memory nvidia-smi measures, and (j)
 * the three side by side.
 * Every model step records one execution's time from the server's statistics. Each step has a time
 * box; a failed step is recorded and the check goes on. Without a GPU adapter it stops at once,
 * naming what the host lacks (exit status 2).
 *
 *   node check.js --out FILE --work DIR [--quick] [--timeout-secs N] [--rehearse-on-cpu] [--serve-setting NAME]
 *
 * `--rehearse-on-cpu` runs every step with KIND_CPU models and --model-memory-limit, to try the
 * check's own code on a host without a GPU (the nvidia-smi steps then fail, as they should, and so
 * does the PyTorch step where python3 has no torch with CUDA, naming why).
 *   node check.js --probe-adapter MODEL    (the adapter probe, in a child process of its own)
 *   node check.js --webgpu-variant MODEL WIDTH RUNS gpu|cpu VARIANT    (one session setting's timing: webgpu-variants.ts)
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ort from 'onnxruntime-node';
import { HttpClient, type ModelStatistics } from '@batchwise/client';
import { measure, readStats, type WindowOptions } from '@batchwise/client/load';
import { mlp } from '@batchwise/modelgen/models';
import { writeModel } from '@batchwise/modelgen/graph-builder';
import { mulberry32, uniformFloat32 } from '@batchwise/modelgen/prng';
import { useHeadlessVulkanDrivers } from '@batchwise/server/backends/headless-vulkan.ts';
import { INSTANCE_WORKER_BYTES } from '@batchwise/server/test-support/model-footprint.ts';
import { EPHEMERAL_PORT_FLAGS, spawnServer, type ServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { addModel, fp32Config, inferRequest } from '../src/workload.ts';
import { runChildForVerdict } from './child-verdict.ts';
import { executionTable, executionTimes, type ExecutionTimes } from './execution-times.ts';
import { descendantProcesses, gpuMemoryUsedBytes, missingForVulkan, processGpuMemoryBytes, runTool } from './host.ts';
import { profileExecution, profileLines } from './ort-profile.ts';
import { ATOL, compareWithin, RTOL } from './tolerance.ts';
import { thirdPartyConfig, type ThirdPartyManifest } from './third-party.ts';
import { probeTorch, writeTorchModel } from './torch-model.ts';
import { runTune, tuneArgs } from './tune-cpu.ts';
import {
  fastestServable,
  measureVariantHere,
  servable,
  runVariant,
  variantSummary,
  variantTable,
  WEBGPU_VARIANTS,
  type VariantResult,
  type WebGpuVariant,
} from './webgpu-variants.ts';

export const NO_ADAPTER = 'no GPU adapter';
const PROBE_MARK = 'gpu-check-probe:';
const CLIENTS = 16;
/** The adapter probe's MLP: 2x64. */
const PROBE_WIDTH = 64;
/**
 * The check's MLP served four ways on the GPU (one, no batching, two and four instances) and once on the CPU;
 * `mlp_gpu_best` joins them when step (g0) finds a setting a config can ask for that is faster.
 */
const SERVED_MLPS = ['mlp_gpu', 'mlp_gpu_unbatched', 'mlp_gpu_2', 'mlp_gpu_4', 'mlp_cpu'];
/** Issue 45's targets on the lent GPU: WebGPU's throughput at 16 clients over the tuned CPU's, and one WebGPU execution at batch 1. */
export const TARGET_GPU_OVER_CPU = 3;
export const TARGET_BATCH_ONE_MS = 0.5;

interface Args {
  readonly out: string;
  readonly work: string;
  readonly quick: boolean;
  readonly rehearse: boolean;
  readonly deadline: number;
  /** Where the pack put the third-party models and their models.json. */
  readonly thirdParty: string;
  /** A (g0) setting to serve as `mlp_gpu_best` whatever its time (`--serve-setting NAME`). */
  readonly serveSetting?: string;
}

interface StepRecord {
  readonly name: string;
  ok: boolean;
  seconds: number;
  summary: string;
  readonly lines: string[];
}

class Report {
  readonly steps: StepRecord[] = [];
  readonly facts: string[] = [];

  constructor(
    private readonly out: string,
    private readonly deadline: number,
  ) {}

  /**
   * Runs one step within `boxMs` and what is left of the check's own time; its failure (or
   * time-out) is recorded, not thrown.
   */
  async step(name: string, boxMs: number, body: (record: StepRecord) => Promise<void>): Promise<StepRecord> {
    const record: StepRecord = { name, ok: false, seconds: 0, summary: '', lines: [] };
    this.steps.push(record);
    const timeoutMs = Math.min(boxMs, this.deadline - Date.now());
    if (timeoutMs <= 0) {
      record.summary = "SKIPPED: the check's time (--timeout-secs) is spent";
      this.write();
      return record;
    }
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        body(record).then(() => (record.ok = true)),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`time box of ${timeoutMs / 1000} s passed`)), timeoutMs))),
      ]);
    } catch (error) {
      record.ok = false;
      record.summary = `FAILED: ${(error as Error).message}`.slice(0, 1200);
    } finally {
      clearTimeout(timer);
      record.seconds = (performance.now() - started) / 1000;
    }
    process.stdout.write(`gpu-check: ${record.ok ? 'ok  ' : 'FAIL'} ${name} (${record.seconds.toFixed(1)} s): ${record.summary}\n`);
    this.write();
    return record;
  }

  /** Written after every step, so a check killed at its limit still leaves what it found. */
  write(): void {
    const table = ['| step | result | s | summary |', '| --- | --- | --- | --- |'];
    for (const s of this.steps)
      table.push(
        `| ${s.name} | ${s.ok ? 'ok' : 'FAILED'} | ${s.seconds.toFixed(1)} | ${s.summary.replaceAll('|', '\\|').replaceAll('\n', ' ')} |`,
      );
    const details = this.steps.flatMap((s) => [`## ${s.name}`, '', ...s.lines, '']);
    const text = ['# Batchwise GPU check', '', ...this.facts, '', ...table, '', ...details].join('\n');
    writeFileSync(this.out, text);
  }
}

/** The check's models: KIND_GPU on the webgpu accelerator, or KIND_CPU in a rehearsal. */
function gpuPlacement(args: Args): { kind: 'KIND_GPU' | 'KIND_CPU'; gpuAccelerator?: string } {
  return args.rehearse ? { kind: 'KIND_CPU' } : { kind: 'KIND_GPU', gpuAccelerator: 'webgpu' };
}

function fenced(text: string): string[] {
  return ['```', text.trim(), '```'];
}

function parseArgs(argv: readonly string[]): Args {
  const value = (flag: string) => {
    const at = argv.indexOf(flag);
    return at >= 0 ? argv[at + 1] : undefined;
  };
  const out = value('--out');
  const work = value('--work');
  if (!out || !work)
    throw new Error(
      'usage: check.js --out FILE --work DIR [--quick] [--timeout-secs N] [--rehearse-on-cpu] [--third-party DIR] [--serve-setting NAME]',
    );
  const serveSetting = value('--serve-setting');
  if (serveSetting !== undefined && !WEBGPU_VARIANTS.some((v) => v.name === serveSetting && servable(v)))
    throw new Error(
      `--serve-setting: '${serveSetting}' is not a setting a config can ask for; one of: ${WEBGPU_VARIANTS.filter(servable)
        .map((v) => v.name)
        .join('; ')}`,
    );
  return {
    out,
    work,
    quick: argv.includes('--quick'),
    rehearse: argv.includes('--rehearse-on-cpu'),
    deadline: Date.now() + Number(value('--timeout-secs') ?? 420) * 1000,
    thirdParty: value('--third-party') ?? fileURLToPath(new URL('../third-party/', import.meta.url)),
    ...(serveSetting !== undefined && { serveSetting }),
  };
}

/** The adapter probe's child: one WebGPU session on `model`, run once, with ONNX Runtime's log at verbose (the adapter, node placements). */
async function probeAdapter(model: string): Promise<void> {
  ort.env.logLevel = 'verbose';
  try {
    const session = await ort.InferenceSession.create(model, { executionProviders: ['webgpu'], logSeverityLevel: 0 });
    const width = PROBE_WIDTH;
    await session.run({ INPUT0: new ort.Tensor('float32', new Float32Array(width), [1, width]) });
    await session.release();
    process.stdout.write(`\n${PROBE_MARK}${JSON.stringify({ ok: true })}\n`);
  } catch (error) {
    process.stdout.write(`\n${PROBE_MARK}${JSON.stringify({ ok: false, error: (error as Error).message })}\n`);
  }
}

/** Runs the probe in a child (Dawn's failures can take the process with them) and returns its verdict and log. */
async function runProbe(model: string, timeoutMs: number): Promise<{ ok: boolean; error?: string; log: string }> {
  const child = await runChildForVerdict<{ ok: boolean; error?: string }>(
    [fileURLToPath(import.meta.url), '--probe-adapter', model],
    PROBE_MARK,
    timeoutMs,
  );
  return { ...(child.verdict ?? { ok: false, error: `the probe exited (${child.ended}) without a verdict` }), log: child.log };
}

/** Lines of ONNX Runtime's and Dawn's log that say which adapter was picked, and where nodes were placed. */
function adapterLines(log: string): { adapter: string[]; cpuPlacements: string[] } {
  const lines = log.split('\n').map((l) => l.replace(/\u001b\[[0-9;]*m/g, ''));
  return {
    adapter: lines
      .filter((l) => /adapter|vulkan|nvidia|dawn|webgpu context|backend type|vendor|vkCreateInstance|driver/i.test(l))
      .slice(0, 40),
    cpuPlacements: lines.filter((l) => /CPUExecutionProvider|not assigned to the preferred/i.test(l)).slice(0, 20),
  };
}

interface InferJson {
  outputs: { name: string; shape: number[]; data: number[] }[];
}

async function inferJson(httpUrl: string, model: string, rows: Float32Array, width: number): Promise<Float32Array> {
  const body = { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [rows.length / width, width], data: Array.from(rows) }] };
  const response = await fetch(`${httpUrl}/v2/models/${model}/infer`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${model}: HTTP ${response.status} ${text.slice(0, 400)}`);
  return Float32Array.from((JSON.parse(text) as InferJson).outputs[0]!.data);
}

async function getJson(url: string): Promise<unknown> {
  const response = await fetch(url);
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    return `${response.status} ${text.slice(0, 300)}`;
  }
}

/** Servers still running when the check ends (a step that ran out of time leaves its server): killed on exit. */
const running = new Set<ServerProcess>();
process.on('exit', () => {
  for (const server of running) server.child.kill('SIGKILL');
});

async function startServer(args: Args, repo: string, extra: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<ServerProcess> {
  const main = fileURLToPath(new URL('../server/main.js', import.meta.url));
  const server = await spawnServer(
    [
      main,
      'serve',
      '--http-address',
      '127.0.0.1',
      ...EPHEMERAL_PORT_FLAGS,
      '--shutdown-grace-secs',
      '0',
      '--metrics-interval-ms',
      '1000',
      '--model-repository',
      repo,
      ...extra,
    ],
    env,
    { cwd: args.work },
  );
  running.add(server);
  void server.exited.then(() => running.delete(server));
  return server;
}

/** Load errors and warnings the server logged (level 40 and up), for the report. */
function serverComplaints(server: ServerProcess): string[] {
  return server.logs
    .filter((l) => typeof l['level'] === 'number' && (l['level'] as number) >= 40)
    .map((l) => JSON.stringify(l).slice(0, 800));
}

/** The server's CLI: app/server/main.js beside app/check/ in the pack. */
function serverMain(): string {
  return fileURLToPath(new URL('../server/main.js', import.meta.url));
}

function loadWindows(args: Args): WindowOptions {
  return args.quick
    ? { warmupMs: 500, windowMs: 1500, minWindows: 1, maxWindows: 1, tolerance: 1 }
    : { warmupMs: 1500, windowMs: 3000, minWindows: 2, maxWindows: 4, tolerance: 0.1 };
}

/** One model under CLIENTS closed-loop clients, one row (1 x width FP32) a request over HTTP binary. */
interface LoadRow {
  readonly model: string;
  readonly throughput: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly errors: number;
  readonly rowsPerExecution: number;
  readonly firstError?: string;
}

async function loadAt(s: ServerProcess, model: string, width: number, windows: WindowOptions): Promise<LoadRow> {
  const request = inferRequest({ httpUrl: s.httpUrl, grpcAddress: s.grpcAddress }, 'http-binary', model, width, CLIENTS);
  try {
    const before = await readCounts(s.httpUrl, model);
    const result = await measure(model, request.send, { concurrency: CLIENTS }, windows);
    const after = await readCounts(s.httpUrl, model);
    return {
      model,
      throughput: result.throughput,
      p50Ms: result.latencyMs.p50,
      p99Ms: result.latencyMs.p99,
      errors: result.errors,
      rowsPerExecution: (after.inferences - before.inferences) / Math.max(1, after.executions - before.executions),
      ...(result.firstError && { firstError: result.firstError }),
    };
  } finally {
    await request.close();
  }
}

function loadTable(rows: readonly LoadRow[]): string[] {
  return [
    '| model | req/s | rows/s | p50 ms | p99 ms | errors | rows per execution |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...rows.map(
      (r) =>
        `| ${r.model} | ${r.throughput.toFixed(0)} | ${r.throughput.toFixed(0)} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | ${r.errors} | ${r.rowsPerExecution.toFixed(1)} |`,
    ),
    ...rows.filter((r) => r.firstError).map((r) => `- ${r.model} first error: ${r.firstError}`),
  ];
}

/**
 * `count` requests of one sample, one at a time (so each runs alone, at batch 1), and one batch-1
 * execution's times as the server's statistics count them over those requests.
 */
async function batchOne(
  httpUrl: string,
  model: string,
  inputs: { name: string; shape: number[]; data: Float32Array }[],
  count: number,
): Promise<{ times?: ExecutionTimes; clientMedianMs: number }> {
  const client = new HttpClient({ url: httpUrl, connections: 1 });
  const latencies: number[] = [];
  try {
    const before = await readStats(httpUrl, model);
    for (let i = 0; i < count; i++) {
      const t0 = performance.now();
      await client.infer({ model, inputs: inputs.map((x) => ({ ...x, datatype: 'FP32' as const })) });
      latencies.push(performance.now() - t0);
    }
    const times = executionTimes(await readStats(httpUrl, model), before).find((t) => t.batchSize === 1);
    latencies.sort((a, b) => a - b);
    return { ...(times && { times }), clientMedianMs: latencies[Math.floor(latencies.length / 2)] ?? 0 };
  } finally {
    await client.close();
  }
}

/** The per-execution table of `models` as the server's statistics hold them since each loaded. */
async function statisticsTable(httpUrl: string, models: readonly string[]): Promise<string[]> {
  const rows: { model: string; rows: ExecutionTimes[] }[] = [];
  for (const model of models) {
    const stats: ModelStatistics | undefined = await readStats(httpUrl, model).catch(() => undefined);
    rows.push({ model, rows: stats ? executionTimes(stats) : [] });
  }
  return [
    "One execution's time by the server's statistics (`/v2/models/<m>/stats`, batch_stats: compute_infer ns / executions of each batch size):",
    '',
    ...executionTable(rows),
  ];
}

/** What the side-by-side step (j) shows: each contender's load at CLIENTS clients and one batch-1 execution. */
interface Contender {
  /** The model's name, for summaries. */
  readonly model: string;
  label: string;
  load?: LoadRow;
  batchOne?: ExecutionTimes;
}

/** How far `value` is from a target it should reach (`atLeast`) or stay under. */
export function againstTarget(value: number, target: number, atLeast: boolean, unit: string): string {
  const met = atLeast ? value >= target : value <= target;
  const shown = `${unit === 'x' ? 'x' : ''}${value.toFixed(2)}${unit === 'x' ? '' : ` ${unit}`}`;
  const goal = `${atLeast ? '>=' : '<='} ${unit === 'x' ? 'x' : ''}${target}${unit === 'x' ? '' : ` ${unit}`}`;
  if (met) return `${shown}, target ${goal} met`;
  const factor = atLeast ? target / value : value / target;
  return `${shown}, target ${goal} MISSED by ${factor.toFixed(2)}x`;
}

async function main(args: Args): Promise<number> {
  const report = new Report(args.out, args.deadline);
  const nodeVersion = process.version;
  report.facts.push(
    `- when: ${new Date().toISOString()}; node ${nodeVersion}; onnxruntime-node ${ort.env.versions.node ?? ort.env.versions.common}`,
  );
  if (args.rehearse)
    report.facts.push('- REHEARSAL on the CPU (--rehearse-on-cpu): KIND_CPU models, --model-memory-limit; not a GPU result');
  report.facts.push(`- tolerance against ONNX Runtime's CPU run: |gpu - cpu| <= ${ATOL} + ${RTOL} * |cpu| (FP32)`);
  // As `serve` does; the probe and the server inherit VK_DRIVER_FILES from here.
  const headless = useHeadlessVulkanDrivers();
  if (headless)
    report.facts.push(`- no display: the NVIDIA Vulkan driver through ${headless.library}, not ${headless.replaces}'s GLX library`);
  report.facts.push(
    `- VK_DRIVER_FILES=${process.env['VK_DRIVER_FILES'] ?? '(unset)'}; LD_LIBRARY_PATH=${process.env['LD_LIBRARY_PATH'] ?? '(unset)'}`,
  );

  await report.step('host: nvidia-smi', 30_000, async (r) => {
    const list = await runTool('nvidia-smi', ['-L']);
    const query = await runTool('nvidia-smi', ['--query-gpu=name,driver_version,memory.total,memory.used', '--format=csv']);
    r.lines.push(
      ...fenced(
        `$ nvidia-smi -L\n${list.text}\n$ nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv\n${query.text}`,
      ),
    );
    if (!list.ok) throw new Error(`nvidia-smi: ${list.text.split('\n')[0]}`);
    r.summary = `${list.text.split('\n')[0]}; ${query.text.split('\n')[1] ?? ''}`;
  });

  // The MLP of the check: 4x2048 (67 MB) shows batching on a CPU; the GPU runs it in well under a millisecond a batch.
  const layers = 4;
  const width = args.quick ? 512 : 2048;
  const models = join(args.work, 'models');
  const repo = join(args.work, 'repo');
  const modelFile = join(models, `mlp_${layers}x${width}.onnx`);
  const probeFile = join(models, 'mlp_probe.onnx');
  let modelBytes = 0;
  await report.step('models', 60_000, async (r) => {
    mkdirSync(models, { recursive: true });
    modelBytes = await writeModel(modelFile, mlp({ layers, width }));
    await writeModel(probeFile, mlp({ layers: 2, width: PROBE_WIDTH }));
    const gpu = { width, maxBatchSize: 64, ...gpuPlacement(args) };
    await addModel(repo, { name: 'mlp_gpu', modelFile, config: fp32Config('mlp_gpu', { ...gpu, batching: true }) });
    await addModel(repo, { name: 'mlp_gpu_unbatched', modelFile, config: fp32Config('mlp_gpu_unbatched', { ...gpu, batching: false }) });
    // tune cannot configure a WebGPU model (its GPU candidates name CUDA): more instances are the one knob tried by hand.
    await addModel(repo, { name: 'mlp_gpu_2', modelFile, config: fp32Config('mlp_gpu_2', { ...gpu, batching: true, instances: 2 }) });
    await addModel(repo, { name: 'mlp_gpu_4', modelFile, config: fp32Config('mlp_gpu_4', { ...gpu, batching: true, instances: 4 }) });
    await addModel(repo, { name: 'mlp_cpu', modelFile, config: fp32Config('mlp_cpu', { width, maxBatchSize: 64, batching: true }) });
    r.lines.push(
      `MLP ${layers}x${width} FP32, ${modelBytes} bytes; mlp_gpu (KIND_GPU, webgpu, dynamic batching), mlp_gpu_unbatched (batching off), mlp_gpu_2 and mlp_gpu_4 (two and four instances), mlp_cpu (KIND_CPU twin).`,
    );
    r.lines.push('', ...fenced(fp32Config('mlp_gpu', { ...gpu, batching: true })));
    r.summary = `MLP ${layers}x${width}, ${(modelBytes / 1e6).toFixed(1)} MB`;
  });

  const adapter = await report.step('GPU adapter (WebGPU on Vulkan)', 60_000, async (r) => {
    if (args.rehearse) {
      r.summary = 'not probed: a rehearsal on the CPU';
      return;
    }
    const probe = await runProbe(probeFile, 55_000);
    const { adapter: lines, cpuPlacements } = adapterLines(probe.log);
    r.lines.push("ONNX Runtime's and Dawn's lines about the adapter:", ...fenced(lines.join('\n') || '(none logged)'));
    r.lines.push(
      '',
      `Nodes placed on the CPU (fallback) in the probe's log: ${cpuPlacements.length}`,
      ...(cpuPlacements.length ? fenced(cpuPlacements.join('\n')) : []),
    );
    if (!probe.ok) {
      const missing = await missingForVulkan();
      r.lines.push('', "The probe's whole log:", ...fenced(probe.log.slice(-6000)));
      const reason =
        /Failed to get a WebGPU adapter[^\n]*/.exec(probe.error ?? '')?.[0] ?? (probe.error ?? '').split('\n')[0]!.slice(0, 300);
      throw new Error(
        `${NO_ADAPTER}: ONNX Runtime's WebGPU provider could not start (${reason}). Missing: ${missing.length ? missing.join('; ') : 'nothing this check can name (see the log)'}`,
      );
    }
    r.summary = `adapter found; ${
      lines
        .find((l) => /nvidia|adapter/i.test(l))
        ?.trim()
        .slice(0, 200) ?? 'ORT logged no adapter name'
    }; CPU placements ${cpuPlacements.length}`;
  });
  if (!adapter.ok) {
    report.write();
    process.stderr.write(`gpu-check: ${adapter.summary}\n`);
    return 2;
  }

  const servedMlps = [...SERVED_MLPS];
  let bestSetting: string | undefined;
  await report.step(`(g0) WebGPU session settings: one execution by batch size, in child processes`, 150_000, async (r) => {
    const device = args.rehearse ? 'cpu' : 'gpu';
    const files = { mlp: modelFile, probe: probeFile, mlpWidth: width, probeWidth: PROBE_WIDTH };
    const results: VariantResult[] = [];
    for (const variant of WEBGPU_VARIANTS) {
      results.push(await runVariant(fileURLToPath(import.meta.url), files, variant, args.quick ? 20 : 200, device, 40_000));
    }
    r.lines.push(
      `Each variant in a child process of its own: session.run of the MLP (${args.quick ? 20 : 200} runs at batch 1, a quarter as many at 16 and 64, after 3 warm-up runs), outputs read back to the host unless said; answers against ONNX Runtime's CPU run for batches 1, 16, 64, 1.${args.rehearse ? ' A REHEARSAL: the CPU provider, so the webgpu settings do nothing here.' : ''}`,
      '',
      ...variantTable(results),
    );
    r.summary = variantSummary(results);
    const best = args.serveSetting ? WEBGPU_VARIANTS.find((v) => v.name === args.serveSetting) : fastestServable(results);
    if (best) {
      // In a rehearsal KIND_CPU, which leaves the accelerator's parameters aside.
      const config = fp32Config('mlp_gpu_best', {
        width,
        maxBatchSize: 64,
        batching: true,
        ...gpuPlacement(args),
        gpuAccelerator: 'webgpu',
        ...(best.accelerator && { gpuAcceleratorParameters: best.accelerator }),
        ...(best.modelParameters && { parameters: best.modelParameters }),
      });
      await addModel(repo, { name: 'mlp_gpu_best', modelFile, config });
      servedMlps.push('mlp_gpu_best');
      bestSetting = best.name;
      r.lines.push('', `Served as mlp_gpu_best (${best.name}), beside mlp_gpu, from this config:`, ...fenced(config));
      r.summary += `; served as mlp_gpu_best: ${best.name}`;
    }
  });

  const webgpu: Contender = { model: 'mlp_gpu', label: args.rehearse ? 'mlp_gpu (rehearsal: KIND_CPU)' : 'mlp_gpu: WebGPU (KIND_GPU)' };
  const cpu: Contender = { model: 'mlp_cpu', label: `mlp_cpu: KIND_CPU on ${availableParallelism()} cores, untuned` };
  const torch: Contender = { model: 'mlp_torch', label: 'mlp_torch: PyTorch on CUDA (Python backend, KIND_GPU)' };
  await report.step(`KIND_CPU config by batchwise tune (${CLIENTS} clients)`, args.quick ? 90_000 : 200_000, async (r) => {
    const options = {
      serverMain: serverMain(),
      repository: repo,
      model: 'mlp_cpu',
      outDir: join(args.work, 'tune-mlp_cpu'),
      concurrency: CLIENTS,
      // Generous: the comparison is of throughput at CLIENTS clients, not of a latency objective.
      latencyObjective: '1s',
      // --quick proves the step (the CI rehearsal runs it): two candidates, short windows.
      budget: args.quick ? '8s' : '120s',
      windowMs: args.quick ? 300 : 1000,
      maxWindows: args.quick ? 1 : 2,
      ...(args.quick && { maxCandidates: 2 }),
      timeoutMs: args.quick ? 80_000 : 190_000,
      cwd: args.work,
    };
    const tuned = await runTune(options);
    r.lines.push(
      `\`batchwise tune\` on this host's ${availableParallelism()} cores, no GPU visible to it (CUDA_VISIBLE_DEVICES empty), exit status ${tuned.status}:`,
      ...fenced(`$ node ${tuneArgs(options).join(' ')}\n${tuned.output.trim().split('\n').slice(-40).join('\n')}`),
    );
    if (!tuned.configText) throw new Error(`tune recommended no config (${tuned.verdict})`);
    writeFileSync(join(repo, 'mlp_cpu', 'config.pbtxt'), tuned.configText);
    r.lines.push('', 'mlp_cpu served with the config tune recommends:', ...fenced(tuned.configText));
    const candidate = /^(?:recommended|nearest): (.+?) —/.exec(tuned.verdict)?.[1] ?? 'see the report';
    cpu.label = `mlp_cpu: KIND_CPU on ${availableParallelism()} cores, tuned (${candidate})`;
    r.summary = tuned.verdict.slice(0, 300);
  });

  const baselineGpuBytes = await gpuMemoryUsedBytes();
  let server: ServerProcess | undefined;
  const serve = await report.step('serve (KIND_GPU on webgpu)', 120_000, async (r) => {
    server = await startServer(args, repo, []);
    for (const model of servedMlps) {
      const ready = await fetch(`${server.httpUrl}/v2/models/${model}/ready`);
      r.lines.push(`- ${model}: ready ${ready.status === 200}`);
    }
    r.lines.push('', 'mlp_gpu metadata and config:', ...fenced(JSON.stringify(await getJson(`${server.httpUrl}/v2/models/mlp_gpu`))));
    r.lines.push(...fenced(JSON.stringify(await getJson(`${server.httpUrl}/v2/models/mlp_gpu/config`)).slice(0, 3000)));
    const complaints = serverComplaints(server);
    if (complaints.length) r.lines.push('', 'Server warnings and errors:', ...fenced(complaints.join('\n')));
    if ((await fetch(`${server.httpUrl}/v2/models/mlp_gpu/ready`)).status !== 200)
      throw new Error(`mlp_gpu is not ready: ${complaints.at(-1) ?? 'no error logged'}`);
    r.summary = `pid ${server.child.pid}, ${server.httpUrl}`;
  });

  if (!serve.ok) await server?.stop();
  if (serve.ok && server) {
    const s = server;
    await report.step('(a) answers against ONNX Runtime CPU', 60_000, async (r) => {
      const reference = await ort.InferenceSession.create(modelFile, { executionProviders: ['cpu'] });
      const next = mulberry32(38);
      let worst = 0;
      const rows = ['| model | batch | max abs diff | max rel diff | within |', '| --- | --- | --- | --- | --- |'];
      for (const batch of [1, 7, 64]) {
        const input = uniformFloat32(next, batch * width, 1);
        const expected = (await reference.run({ INPUT0: new ort.Tensor('float32', input, [batch, width]) }))['OUTPUT0']!
          .data as Float32Array;
        for (const model of servedMlps) {
          const c = compareWithin(await inferJson(s.httpUrl, model, input, width), expected);
          worst = Math.max(worst, c.worst);
          rows.push(`| ${model} | ${batch} | ${c.maxAbs.toExponential(2)} | ${c.maxRel.toExponential(2)} | ${c.within} |`);
        }
      }
      await reference.release();
      r.lines.push(...rows);
      r.summary = `worst difference ${worst.toFixed(3)} of the tolerance (atol ${ATOL}, rtol ${RTOL})`;
      if (worst > 1) throw new Error(r.summary);
    });

    await report.step("(b) nvidia-smi shows the server's process", 30_000, async (r) => {
      const pid = s.child.pid!;
      const compute = await runTool('nvidia-smi', ['--query-compute-apps=pid,process_name,used_memory', '--format=csv']);
      const plain = await runTool('nvidia-smi', []);
      r.lines.push(
        ...fenced(
          `$ nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv\n${compute.text}\n$ nvidia-smi\n${plain.text}`,
        ),
      );
      const inCompute = compute.text.split('\n').some((l) => l.split(',')[0]?.trim() === String(pid));
      const inPlain = new RegExp(`\\b${pid}\\b`).test(plain.text.split('Processes:')[1] ?? '');
      r.summary = `server pid ${pid}: ${inCompute ? 'listed as a compute app' : 'not among the compute apps'}; ${inPlain ? 'in' : 'not in'} nvidia-smi's process table`;
      if (!inCompute && !inPlain) throw new Error(r.summary);
    });

    await report.step('(c) nv_gpu_* metrics', 30_000, async (r) => {
      const wanted = ['nv_gpu_utilization', 'nv_gpu_memory_used_bytes', 'nv_gpu_memory_total_bytes'];
      let lines: string[] = [];
      // The GPU sampler's first reading can take seconds on a GPU; a rehearsal on the CPU has none to wait for.
      for (let tries = 0; tries < (args.rehearse ? 2 : 20); tries++) {
        lines = (await (await fetch(s.metricsUrl)).text()).split('\n').filter((l) => l.startsWith('nv_gpu_'));
        if (wanted.every((w) => lines.some((l) => l.startsWith(`${w}{`)))) break;
        await new Promise((done) => setTimeout(done, 500));
      }
      const providers = (await (await fetch(s.metricsUrl)).text()).split('\n').filter((l) => l.startsWith('batchwise_model_ready{'));
      r.lines.push(...fenced([...lines, ...providers].join('\n') || '(no nv_gpu_* lines)'));
      const absent = wanted.filter((w) => !lines.some((l) => l.startsWith(`${w}{`)));
      r.summary = absent.length
        ? `absent: ${absent.join(', ')}`
        : lines
            .filter((l) => !l.startsWith('nv_gpu_memory_total'))
            .join('; ')
            .slice(0, 300);
      if (absent.length) throw new Error(r.summary);
    });

    await report.step(`(d) batching at ${CLIENTS} clients`, 90_000, async (r) => {
      const rows: LoadRow[] = [];
      for (const model of ['mlp_gpu', 'mlp_gpu_unbatched']) rows.push(await loadAt(s, model, width, loadWindows(args)));
      webgpu.load = rows[0]!;
      r.lines.push('One row (1 x ' + width + ' FP32) a request over HTTP binary; rows/s = req/s.', '', ...loadTable(rows));
      const gain = rows[0]!.throughput / rows[1]!.throughput;
      r.summary = `dynamic batching ${rows[0]!.throughput.toFixed(0)} req/s vs ${rows[1]!.throughput.toFixed(0)} unbatched: x${gain.toFixed(2)}`;
    });

    await report.step(`(f) WebGPU against the host's CPU (${CLIENTS} clients; batch 1)`, 120_000, async (r) => {
      cpu.load = await loadAt(s, 'mlp_cpu', width, loadWindows(args));
      const one = webgpu.load ?? (await loadAt(s, 'mlp_gpu', width, loadWindows(args)));
      const two = await loadAt(s, 'mlp_gpu_2', width, loadWindows(args));
      const four = await loadAt(s, 'mlp_gpu_4', width, loadWindows(args));
      const tuned = bestSetting ? await loadAt(s, 'mlp_gpu_best', width, loadWindows(args)) : undefined;
      // WebGPU at its best of one, two and four instances and the (g0) setting (tune cannot configure a WebGPU model).
      const labels = new Map<LoadRow | undefined, string>([
        [two, ', two instances'],
        [four, ', four instances'],
        [tuned, `, ${bestSetting}`],
      ]);
      webgpu.load = [one, two, four, ...(tuned ? [tuned] : [])].reduce((best, row) => (row.throughput > best.throughput ? row : best));
      webgpu.label += labels.get(webgpu.load) ?? '';
      const ratio = webgpu.load.throughput / cpu.load.throughput;
      r.lines.push(
        `WebGPU (mlp_gpu: one instance, mlp_gpu_2: two, mlp_gpu_4: four${tuned ? `, mlp_gpu_best: ${bestSetting}` : ''}) against ${cpu.label}, ${CLIENTS} clients, one row a request:`,
        '',
        ...loadTable([one, two, four, ...(tuned ? [tuned] : []), cpu.load]),
      );
      const count = args.quick ? 20 : 200;
      const input = [{ name: 'INPUT0', shape: [1, width], data: uniformFloat32(mulberry32(45), width, 1) }];
      const batchOneRows: string[] = [
        '| model | one execution at batch 1: compute_input / compute_infer / compute_output ms | requests | client median ms |',
        '| --- | --- | --- | --- |',
      ];
      for (const [model, contender] of [
        ['mlp_gpu', webgpu],
        ...(bestSetting ? [['mlp_gpu_best', webgpu] as const] : []),
        ['mlp_cpu', cpu],
      ] as const) {
        const b = await batchOne(s.httpUrl, model, input, count);
        // WebGPU's figure is the faster of mlp_gpu's and mlp_gpu_best's.
        if (b.times && (!contender.batchOne || b.times.inferMs < contender.batchOne.inferMs)) contender.batchOne = b.times;
        batchOneRows.push(
          `| ${model} | ${b.times ? `${b.times.inputMs.toFixed(3)} / ${b.times.inferMs.toFixed(3)} / ${b.times.outputMs.toFixed(3)}` : 'no batch-1 execution counted'} | ${count} | ${b.clientMedianMs.toFixed(3)} |`,
        );
      }
      r.lines.push(
        '',
        `${count} requests of one row, one at a time, each model; one execution's time by the server's statistics (batch_stats, batch size 1):`,
        '',
        ...batchOneRows,
      );
      const gpuOne = webgpu.batchOne?.inferMs;
      r.summary = [
        `throughput ${againstTarget(ratio, TARGET_GPU_OVER_CPU, true, 'x')} (${webgpu.load.model} ${webgpu.load.throughput.toFixed(0)} vs ${cpu.load.throughput.toFixed(0)} req/s)`,
        `one execution at batch 1 ${gpuOne === undefined ? 'not counted' : againstTarget(gpuOne, TARGET_BATCH_ONE_MS, false, 'ms')} (CPU ${cpu.batchOne?.inferMs.toFixed(3) ?? '?'} ms)`,
      ].join('; ');
      r.lines.push('', `- ${r.summary}`);
      if (args.rehearse) r.lines.push('- a rehearsal: "mlp_gpu" runs on the CPU here, so neither figure says anything of a GPU');
    });

    await report.step('GPU memory of the served models', 30_000, async (r) => {
      const used = await gpuMemoryUsedBytes();
      const own = await processGpuMemoryBytes(s.child.pid!);
      r.lines.push(
        `- GPU memory used before the server: ${baselineGpuBytes} bytes; with it (${bestSetting ? 'nine' : 'eight'} KIND_GPU instances of ${modelBytes} bytes of weights): ${used} bytes`,
      );
      r.lines.push(`- the server's process as a compute app: ${own ?? 'not listed'} bytes`);
      r.summary = `delta ${used !== undefined && baselineGpuBytes !== undefined ? used - baselineGpuBytes : '?'} bytes; process ${own ?? 'not listed'}`;
    });

    await report.step('per-execution time (server statistics): MLPs', 30_000, async (r) => {
      r.lines.push(...(await statisticsTable(s.httpUrl, servedMlps)));
      const gpu = executionTimes(await readStats(s.httpUrl, 'mlp_gpu')).find((t) => t.batchSize === 1);
      r.summary = `mlp_gpu at batch 1: ${gpu ? `${gpu.inferMs.toFixed(3)} ms compute_infer` : 'no batch-1 execution'}`;
    });
    await s.stop();
  }

  await report.step(`(g) ONNX Runtime profile of one ${args.rehearse ? 'CPU (rehearsal)' : 'WebGPU'} execution`, 90_000, async (r) => {
    const profileDir = join(args.work, 'profile');
    mkdirSync(profileDir, { recursive: true });
    const providers = args.rehearse ? ['cpu'] : ['webgpu'];
    const profiled = await profileExecution({
      modelFile,
      providers,
      feeds: { INPUT0: new ort.Tensor('float32', uniformFloat32(mulberry32(45), width, 1), [1, width]) },
      dir: profileDir,
      warmups: 3,
      bareRuns: args.quick ? 20 : 200,
    });
    const kept = join(dirname(args.out), 'gpu-check-ort-profile.json');
    copyFileSync(profiled.file, kept);
    const p = profiled.summary;
    r.lines.push(
      `In this process: onnxruntime-node, executionProviders ${JSON.stringify(providers)}, SessionOptions enableProfiling; the MLP at batch 1, 3 runs, then the profiled one. The profile: ${kept}.`,
      '',
      ...profileLines(p),
      '',
      `The same run without profiling, ${profiled.bare.runs} times in this process: median ${profiled.bare.medianMs.toFixed(3)} ms, fastest ${profiled.bare.minMs.toFixed(3)} ms.`,
    );
    if (!args.rehearse)
      r.lines.push(
        '',
        "WebGPU kernels are dispatched, not waited for: a node's time is its dispatch; the wait for the GPU shows in the read-back (a MemcpyToHost node, or the outputs' copy outside the nodes).",
      );
    const placement = Object.entries(p.byProvider)
      .map(([provider, v]) => `${v.nodes} on ${provider.replace('ExecutionProvider', '')}`)
      .join(', ');
    r.summary = `run ${(p.runUs / 1000).toFixed(3)} ms: nodes ${placement || 'none'}; kernels ${(p.kernels.us / 1000).toFixed(3)} ms, uploads ${(p.uploads.us / 1000).toFixed(3)} ms, read-backs ${(p.readBacks.us / 1000).toFixed(3)} ms, outside the nodes ${(p.outsideNodesUs / 1000).toFixed(3)} ms; unprofiled median ${profiled.bare.medianMs.toFixed(3)} ms`;
  });

  await report.step('(h) PyTorch on CUDA through the Python backend', 240_000, async (r) => {
    const torchRepo = join(args.work, 'torch-repo');
    const config = fp32Config('mlp_torch', { width, maxBatchSize: 64, batching: true, backend: 'python', kind: 'KIND_GPU' });
    const written = await writeTorchModel({ repo: torchRepo, name: 'mlp_torch', onnxFile: modelFile, config });
    r.lines.push(
      `mlp_torch: model.py (bench/gpu-check/torch_mlp.py) with the ONNX MLP's ${written.layers} layers' weights as .npy beside it (${written.weightBytes} bytes, read from ${modelFile}):`,
      ...fenced(config),
    );
    const probe = await probeTorch();
    r.lines.push(
      '',
      'Interpreters asked for numpy, torch and CUDA:',
      '',
      ...probe.probes.map((p) => `- ${p.python}: ${p.ok ? 'ok ' : ''}${p.said}`),
    );
    if (!probe.chosen)
      throw new Error(
        `no python3 here has torch with CUDA (python3 -c "import torch; torch.cuda.is_available()"): ${probe.probes.map((p) => `${p.python}: ${p.said}`).join('; ')}`.slice(
          0,
          900,
        ),
      );
    const server = await startServer(args, torchRepo, [], { BATCHWISE_PYTHON: probe.chosen });
    try {
      const ready = (await fetch(`${server.httpUrl}/v2/models/mlp_torch/ready`)).status === 200;
      const complaints = serverComplaints(server);
      if (complaints.length) r.lines.push('', 'Server warnings and errors:', ...fenced(complaints.join('\n')));
      if (!ready) throw new Error(`mlp_torch is not ready: ${complaints.at(-1) ?? 'no error logged'}`);
      r.lines.push(
        '',
        `Served by pid ${server.child.pid} with BATCHWISE_PYTHON=${probe.chosen}; metadata:`,
        ...fenced(JSON.stringify(await getJson(`${server.httpUrl}/v2/models/mlp_torch`))),
      );

      const reference = await ort.InferenceSession.create(modelFile, { executionProviders: ['cpu'] });
      const next = mulberry32(451);
      let worst = 0;
      const rows = ['| batch | max abs diff | max rel diff | within |', '| --- | --- | --- | --- |'];
      try {
        for (const batch of [1, 7, 64]) {
          const input = uniformFloat32(next, batch * width, 1);
          const expected = (await reference.run({ INPUT0: new ort.Tensor('float32', input, [batch, width]) }))['OUTPUT0']!
            .data as Float32Array;
          const c = compareWithin(await inferJson(server.httpUrl, 'mlp_torch', input, width), expected);
          worst = Math.max(worst, c.worst);
          rows.push(`| ${batch} | ${c.maxAbs.toExponential(2)} | ${c.maxRel.toExponential(2)} | ${c.within} |`);
        }
      } finally {
        await reference.release();
      }
      r.lines.push('', "Answers against ONNX Runtime's CPU run in this process:", '', ...rows);

      torch.load = await loadAt(server, 'mlp_torch', width, loadWindows(args));
      r.lines.push('', `${CLIENTS} clients, one row a request:`, '', ...loadTable([torch.load]));
      const count = args.quick ? 20 : 200;
      const b = await batchOne(
        server.httpUrl,
        'mlp_torch',
        [{ name: 'INPUT0', shape: [1, width], data: uniformFloat32(mulberry32(45), width, 1) }],
        count,
      );
      if (b.times) torch.batchOne = b.times;
      r.lines.push('', ...(await statisticsTable(server.httpUrl, ['mlp_torch'])));
      r.lines.push('', `${count} requests at batch 1: client median ${b.clientMedianMs.toFixed(3)} ms`);

      const stubs = descendantProcesses(server.child.pid!).filter((p) => /stub\.py/.test(p.command));
      const compute = await runTool('nvidia-smi', ['--query-compute-apps=pid,process_name,used_memory', '--format=csv']);
      r.lines.push('', `The Python processes (stub.py) of the server: ${stubs.map((p) => p.pid).join(', ') || 'none found'}`);
      const memories: string[] = [];
      for (const stub of stubs) memories.push(`pid ${stub.pid}: ${(await processGpuMemoryBytes(stub.pid)) ?? 'not listed'} bytes`);
      r.lines.push(
        `- GPU memory by nvidia-smi: ${memories.join('; ') || '-'}`,
        ...fenced(`$ nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv\n${compute.text}`),
      );
      const metrics = (await (await fetch(server.metricsUrl)).text()).split('\n').filter((l) => l.startsWith('nv_gpu_'));
      r.lines.push('', "nv_gpu_* on the server's metrics page:", ...fenced(metrics.join('\n') || '(no nv_gpu_* lines)'));
      const modelLines = server.logs.filter((l) => /torch_mlp:/.test(JSON.stringify(l))).map((l) => JSON.stringify(l).slice(0, 600));
      if (modelLines.length) r.lines.push('', "model.py's own lines (how its outputs left the GPU):", ...fenced(modelLines.join('\n')));
      r.summary = `answers within ${worst.toFixed(3)} of the tolerance; ${torch.load.throughput.toFixed(0)} req/s at ${CLIENTS} clients (${torch.load.rowsPerExecution.toFixed(1)} rows an execution); batch 1 ${torch.batchOne ? `${torch.batchOne.inferMs.toFixed(3)} ms` : 'not counted'} an execution; stub GPU memory ${memories.join('; ') || 'not listed'}`;
      if (worst > 1) throw new Error(r.summary);
    } finally {
      await server.stop();
    }
  });

  await report.step('(i) third-party ONNX models, KIND_GPU and KIND_CPU', 180_000, async (r) => {
    const manifestFile = join(args.thirdParty, 'models.json');
    if (!existsSync(manifestFile))
      throw new Error(
        `no third-party model in the pack (${manifestFile} is missing): \`pnpm gpu:pack\` brings them (a --smoke pack only from .cache/gpu-pack)`,
      );
    const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as ThirdPartyManifest;
    r.lines.push(`From ${manifest.source} (${manifest.license}):`, '', ...manifest.models.map((m) => `- ${m.name}: ${m.what}`));
    const thirdRepo = join(args.work, 'third-party-repo');
    const served: string[] = [];
    for (const m of manifest.models) {
      const file = join(args.thirdParty, m.onnx);
      for (const [suffix, placement] of [
        ['gpu', gpuPlacement(args)],
        ['cpu', { kind: 'KIND_CPU' as const }],
      ] as const) {
        const name = `${m.name}_${suffix}`;
        await addModel(thirdRepo, { name, modelFile: file, config: thirdPartyConfig(name, m.maxBatchSize, placement) });
        served.push(name);
      }
    }
    r.lines.push(
      '',
      'Each as a user would bring it: a config naming its instance kind and batching, the rest completed by the server from the ONNX file:',
      ...fenced(thirdPartyConfig(`${manifest.models[0]!.name}_gpu`, manifest.models[0]!.maxBatchSize, gpuPlacement(args))),
    );
    const server = await startServer(args, thirdRepo, []);
    const failures: string[] = [];
    try {
      const rows = [
        '| model | output | batch | max abs diff | max rel diff | worst / tolerance | within |',
        '| --- | --- | --- | --- | --- | --- | --- |',
      ];
      const client = new HttpClient({ url: server.httpUrl, connections: 1 });
      const next = mulberry32(452);
      try {
        for (const m of manifest.models) {
          const reference = await ort.InferenceSession.create(join(args.thirdParty, m.onnx), { executionProviders: ['cpu'] });
          try {
            const inputName = reference.inputNames[0]!;
            for (const suffix of ['gpu', 'cpu']) {
              const name = `${m.name}_${suffix}`;
              if ((await fetch(`${server.httpUrl}/v2/models/${name}/ready`)).status !== 200) {
                failures.push(`${name} is not ready`);
                continue;
              }
            }
            for (const batch of [1, 4]) {
              const shape = [batch, ...m.sampleDims];
              const data = Float32Array.from(
                uniformFloat32(
                  next,
                  shape.reduce((a, b) => a * b, 1),
                  1,
                ),
                (v) => (v + 1) / 2,
              );
              const expected = await reference.run({ [inputName]: new ort.Tensor('float32', data, shape) });
              for (const suffix of ['gpu', 'cpu']) {
                const name = `${m.name}_${suffix}`;
                if (failures.includes(`${name} is not ready`)) continue;
                const answer = await client.infer({ model: name, inputs: [{ name: inputName, datatype: 'FP32', shape, data }] });
                for (const output of reference.outputNames) {
                  const got = answer.outputs.find((o) => o.name === output);
                  if (!got) {
                    failures.push(`${name}: no output ${output}`);
                    continue;
                  }
                  const c = compareWithin(got.data as Float32Array, expected[output]!.data as Float32Array);
                  if (!c.within) failures.push(`${name} batch ${batch} ${output}: worst ${c.worst.toFixed(2)} of the tolerance`);
                  rows.push(
                    `| ${name} | ${output} | ${batch} | ${c.maxAbs.toExponential(2)} | ${c.maxRel.toExponential(2)} | ${c.worst.toFixed(3)} | ${c.within} |`,
                  );
                }
              }
            }
            const count = args.quick ? 3 : 30;
            const sample = {
              name: inputName,
              shape: [1, ...m.sampleDims],
              data: new Float32Array(m.sampleDims.reduce((a, b) => a * b, 1)).fill(0.5),
            };
            for (const suffix of ['gpu', 'cpu']) {
              const name = `${m.name}_${suffix}`;
              if (!failures.includes(`${name} is not ready`)) await batchOne(server.httpUrl, name, [sample], count);
            }
          } finally {
            await reference.release();
          }
        }
      } finally {
        await client.close();
      }
      r.lines.push('', "Answers against ONNX Runtime's CPU run in this process (inputs uniform in [0, 1)):", '', ...rows);
      r.lines.push('', ...(await statisticsTable(server.httpUrl, served)));
      const metadata = await getJson(`${server.httpUrl}/v2/models/${served[0]}`);
      r.lines.push('', `${served[0]} metadata as the server completed it:`, ...fenced(JSON.stringify(metadata)));
      const complaints = serverComplaints(server);
      if (complaints.length) r.lines.push('', 'Server warnings and errors:', ...fenced(complaints.join('\n')));
      // Where ONNX Runtime put each node of a real model on this provider, and what one execution spends where.
      const providers = args.rehearse ? ['cpu'] : ['webgpu'];
      const profileDir = join(args.work, 'profile-third-party');
      mkdirSync(profileDir, { recursive: true });
      r.lines.push(
        '',
        `ONNX Runtime's profile of one execution at batch 1 in this process, executionProviders ${JSON.stringify(providers)}:`,
        '',
      );
      for (const m of manifest.models) {
        const reference = await ort.InferenceSession.create(join(args.thirdParty, m.onnx), { executionProviders: ['cpu'] });
        const inputName = reference.inputNames[0]!;
        await reference.release();
        const shape = [1, ...m.sampleDims];
        const data = new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(0.5);
        const profiled = await profileExecution({
          modelFile: join(args.thirdParty, m.onnx),
          providers,
          feeds: { [inputName]: new ort.Tensor('float32', data, shape) },
          dir: profileDir,
          warmups: 1,
          bareRuns: 0,
        }).catch((error: Error) => error);
        if (profiled instanceof Error) {
          r.lines.push(`- ${m.name}: no profile (${profiled.message.split('\n')[0]})`);
          continue;
        }
        const p = profiled.summary;
        const cpuOps = [...new Set(p.nodes.filter((n) => n.provider === 'CPUExecutionProvider').map((n) => n.op))];
        r.lines.push(
          `- ${m.name}: run ${(p.runUs / 1000).toFixed(3)} ms; ${Object.entries(p.byProvider)
            .map(([provider, v]) => `${v.nodes} nodes on ${provider} (${(v.us / 1000).toFixed(3)} ms)`)
            .join(
              ', ',
            )}; uploads ${p.uploads.nodes} (${(p.uploads.us / 1000).toFixed(3)} ms), read-backs ${p.readBacks.nodes} (${(p.readBacks.us / 1000).toFixed(3)} ms), outside the nodes ${(p.outsideNodesUs / 1000).toFixed(3)} ms${
            !args.rehearse && cpuOps.length ? `; ops on the CPU: ${cpuOps.join(', ')}` : ''
          }`,
        );
        copyFileSync(profiled.file, join(dirname(args.out), `gpu-check-ort-profile-${m.name}.json`));
      }
      const gpuOnes = [];
      for (const m of manifest.models) {
        const stats = await readStats(server.httpUrl, `${m.name}_gpu`).catch(() => undefined);
        const one = stats && executionTimes(stats).find((t) => t.batchSize === 1);
        gpuOnes.push(`${m.name}_gpu ${one ? `${one.inferMs.toFixed(3)} ms` : '?'}`);
      }
      r.summary = `${served.length} models; ${failures.length ? `FAILURES: ${failures.join('; ')}` : "all answers within the tolerance of ONNX Runtime's CPU run"}; batch 1: ${gpuOnes.join(', ')} an execution`;
      if (failures.length) throw new Error(r.summary);
    } finally {
      await server.stop();
    }
  });

  const limitFlag = args.rehearse ? '--model-memory-limit' : '--model-gpu-memory-limit';
  await report.step(`(e) ${limitFlag}`, 120_000, async (r) => {
    const limitRepo = join(args.work, 'limit-repo');
    for (const [name, seed] of [
      ['gpu_a', 2],
      ['gpu_b', 3],
    ] as const) {
      const file = join(models, `${name}.onnx`);
      await writeModel(file, mlp({ layers, width, seed }));
      await addModel(limitRepo, {
        name,
        modelFile: file,
        config: fp32Config(name, { width, maxBatchSize: 64, batching: true, ...gpuPlacement(args) }),
      });
    }
    const one = new Float32Array(width);
    // What the limit counts of a model: on the GPU its weights; on the CPU its worker thread too.
    const counted = args.rehearse ? modelBytes + INSTANCE_WORKER_BYTES : modelBytes;
    // Room for one model, not two: loading the second must evict the first.
    const roomy = Math.floor(counted * 1.5);
    const evicting = await startServer(args, limitRepo, ['--load-on-demand', limitFlag, String(roomy)]);
    try {
      const base = await gpuMemoryUsedBytes();
      await inferJson(evicting.httpUrl, 'gpu_a', one, width);
      const withA = await gpuMemoryUsedBytes();
      await inferJson(evicting.httpUrl, 'gpu_b', one, width);
      await new Promise((done) => setTimeout(done, 1000));
      const withB = await gpuMemoryUsedBytes();
      const index = (await getJson(`${evicting.httpUrl.replace(/\/$/, '')}/v2/repository/index`)) as unknown;
      const evicted = evicting.logs.filter((l) => String(l['msg']).startsWith('model evicted'));
      r.lines.push(`Limit ${roomy} bytes (1.5 x ${counted} bytes counted of a model), --load-on-demand:`);
      r.lines.push(
        `- GPU memory used: ${base} before, ${withA} with gpu_a (+${(withA ?? 0) - (base ?? 0)}), ${withB} after gpu_b's load (+${(withB ?? 0) - (base ?? 0)} from the start)`,
      );
      r.lines.push(`- evictions logged: ${evicted.length ? evicted.map((l) => JSON.stringify(l)).join(' ') : 'none'}`);
      r.lines.push('- repository index:', ...fenced(JSON.stringify(index)));
      const complaints = serverComplaints(evicting);
      if (complaints.length) r.lines.push('', ...fenced(complaints.join('\n')));
      if (evicted.length === 0)
        throw new Error(
          `loading gpu_b beside gpu_a under a limit of ${roomy} bytes evicted nothing: the limit does not count these instances`,
        );
    } finally {
      await evicting.stop();
    }
    const tight = Math.floor(counted / 2);
    const refusing = await startServer(args, limitRepo, ['--load-on-demand', limitFlag, String(tight)]);
    try {
      const refusal = await inferJson(refusing.httpUrl, 'gpu_a', one, width).then(
        () => undefined,
        (error: Error) => error.message,
      );
      r.lines.push('', `Limit ${tight} bytes (half of what a model counts): ${refusal ?? 'gpu_a loaded and answered'}`);
      if (!refusal?.includes(limitFlag)) throw new Error(`a limit of half gpu_a's count did not refuse it: ${refusal ?? 'it answered'}`);
    } finally {
      await refusing.stop();
    }
    r.summary = `one model within ${roomy} bytes, the second evicts it; ${tight} bytes refuses`;
  });

  await report.step(`(j) side by side: ${CLIENTS} clients and one execution at batch 1`, 10_000, async (r) => {
    const rows = [
      `| contender | req/s at ${CLIENTS} clients | p50 ms | p99 ms | rows per execution | one execution at batch 1, ms (compute_infer) | against the CPU |`,
      '| --- | --- | --- | --- | --- | --- | --- |',
    ];
    for (const c of [webgpu, cpu, torch]) {
      const ratio = c.load && cpu.load && c !== cpu ? `x${(c.load.throughput / cpu.load.throughput).toFixed(2)}` : '-';
      rows.push(
        c.load
          ? `| ${c.label} | ${c.load.throughput.toFixed(0)} | ${c.load.p50Ms.toFixed(2)} | ${c.load.p99Ms.toFixed(2)} | ${c.load.rowsPerExecution.toFixed(1)} | ${c.batchOne?.inferMs.toFixed(3) ?? '-'} | ${ratio} |`
          : `| ${c.label} | not measured (its step failed) | - | - | - | ${c.batchOne?.inferMs.toFixed(3) ?? '-'} | - |`,
      );
    }
    r.lines.push(
      `The ${layers}x${width} MLP, one row (1 x ${width} FP32) a request over HTTP binary, each served by its own config in this run:`,
      '',
      ...rows,
      '',
      `Targets (issue 45): WebGPU >= x${TARGET_GPU_OVER_CPU} the tuned CPU's throughput; one WebGPU execution at batch 1 <= ${TARGET_BATCH_ONE_MS} ms.`,
    );
    const measured = [webgpu, cpu, torch].filter((c) => c.load);
    if (measured.length === 0) throw new Error('no contender was measured');
    r.summary = measured.map((c) => `${c.load!.model} ${c.load!.throughput.toFixed(0)} req/s`).join(', ');
    if (webgpu.load && cpu.load)
      r.summary += `; WebGPU/CPU ${againstTarget(webgpu.load.throughput / cpu.load.throughput, TARGET_GPU_OVER_CPU, true, 'x')}`;
    if (torch.load && cpu.load) r.summary += `; torch/CPU x${(torch.load.throughput / cpu.load.throughput).toFixed(2)}`;
  });

  report.write();
  const failed = report.steps.filter((s) => !s.ok).map((s) => s.name);
  process.stdout.write(
    `gpu-check: ${report.steps.length - failed.length}/${report.steps.length} steps ok${failed.length ? `; failed: ${failed.join(', ')}` : ''}; report ${args.out}\n`,
  );
  return failed.length ? 1 : 0;
}

async function readCounts(httpUrl: string, model: string): Promise<{ inferences: number; executions: number }> {
  const stats = (await getJson(`${httpUrl}/v2/models/${model}/stats`)) as {
    model_stats?: { inference_count?: number; execution_count?: number }[];
  };
  const entry = stats.model_stats?.[0];
  return { inferences: Number(entry?.inference_count ?? 0), executions: Number(entry?.execution_count ?? 0) };
}

const argv = process.argv.slice(2);
if (import.meta.url !== pathToFileURL(process.argv[1] ?? '').href) {
  // imported (by the dry run's test): nothing to run
} else if (argv[0] === '--probe-adapter') {
  await probeAdapter(argv[1]!);
} else if (argv[0] === '--webgpu-variant') {
  const [file, width, runs, device, variant] = argv.slice(1);
  await measureVariantHere(file!, Number(width), JSON.parse(variant!) as WebGpuVariant, Number(runs), device === 'cpu' ? 'cpu' : 'gpu');
} else {
  let args: Args;
  try {
    args = parseArgs(argv);
  } catch (error) {
    process.stderr.write(`gpu-check: ${(error as Error).message}\n`);
    process.exit(2);
  }
  const code = await main(args).catch((error: Error) => {
    process.stderr.write(`gpu-check: ${error.stack ?? error.message}\n`);
    return 1;
  });
  process.exit(code);
}
