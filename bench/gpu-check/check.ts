/**
 * The GPU check (issue 38), run from its pack by run.sh on a host with an NVIDIA GPU: serves a
 * KIND_GPU MLP on ONNX Runtime's WebGPU provider (Dawn on Vulkan) and records, in one markdown file:
 * (a) its answers against ONNX Runtime's CPU run of the same model in this process, (b) nvidia-smi
 * showing the server's process, (c) the nv_gpu_* metrics, (d) the batching gain at 16 clients,
 * (e) --model-gpu-memory-limit evicting and refusing beside the GPU memory nvidia-smi measures.
 * Each step has a time box; a failed step is recorded and the check goes on. Without a GPU adapter
 * it stops at once, naming what the host lacks (exit status 2).
 *
 *   node check.js --out FILE --work DIR [--quick] [--timeout-secs N] [--rehearse-on-cpu]
 *
 * `--rehearse-on-cpu` runs every step with KIND_CPU models and --model-memory-limit, to try the
 * check's own code on a host without a GPU (the nvidia-smi steps then fail, as they should).
 *   node check.js --probe-adapter MODEL    (the adapter probe, in a child process of its own)
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ort from 'onnxruntime-node';
import { measure, type WindowOptions } from '@batchwise/client/load';
import { mlp } from '@batchwise/modelgen/models';
import { writeModel } from '@batchwise/modelgen/graph-builder';
import { mulberry32, uniformFloat32 } from '@batchwise/modelgen/prng';
import { useHeadlessVulkanDrivers } from '@batchwise/server/backends/headless-vulkan.ts';
import { INSTANCE_WORKER_BYTES } from '@batchwise/server/test-support/model-footprint.ts';
import { EPHEMERAL_PORT_FLAGS, spawnServer, type ServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { addModel, fp32Config, inferRequest } from '../src/workload.ts';
import { gpuMemoryUsedBytes, missingForVulkan, processGpuMemoryBytes, runTool } from './host.ts';

/** FP32 on a GPU differs from the CPU in summation order and fused multiply-adds: |gpu - cpu| <= ATOL + RTOL * |cpu|. */
export const RTOL = 1e-3;
export const ATOL = 1e-4;
export const NO_ADAPTER = 'no GPU adapter';
const PROBE_MARK = 'gpu-check-probe:';
const CLIENTS = 16;

interface Args {
  readonly out: string;
  readonly work: string;
  readonly quick: boolean;
  readonly rehearse: boolean;
  readonly deadline: number;
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
  if (!out || !work) throw new Error('usage: check.js --out FILE --work DIR [--quick] [--timeout-secs N] [--rehearse-on-cpu]');
  return {
    out,
    work,
    quick: argv.includes('--quick'),
    rehearse: argv.includes('--rehearse-on-cpu'),
    deadline: Date.now() + Number(value('--timeout-secs') ?? 420) * 1000,
  };
}

/** The adapter probe's child: one WebGPU session on `model`, run once, with ONNX Runtime's log at verbose (the adapter, node placements). */
async function probeAdapter(model: string): Promise<void> {
  ort.env.logLevel = 'verbose';
  try {
    const session = await ort.InferenceSession.create(model, { executionProviders: ['webgpu'], logSeverityLevel: 0 });
    const width = 64;
    await session.run({ INPUT0: new ort.Tensor('float32', new Float32Array(width), [1, width]) });
    await session.release();
    process.stdout.write(`\n${PROBE_MARK}${JSON.stringify({ ok: true })}\n`);
  } catch (error) {
    process.stdout.write(`\n${PROBE_MARK}${JSON.stringify({ ok: false, error: (error as Error).message })}\n`);
  }
}

/** Runs the probe in a child (Dawn's failures can take the process with them) and returns its verdict and log. */
function runProbe(model: string, timeoutMs: number): Promise<{ ok: boolean; error?: string; log: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--probe-adapter', model], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout.on('data', (d) => (log += d));
    child.stderr.on('data', (d) => (log += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      const verdict = log.split('\n').find((l) => l.startsWith(PROBE_MARK));
      const parsed = verdict
        ? (JSON.parse(verdict.slice(PROBE_MARK.length)) as { ok: boolean; error?: string })
        : { ok: false, error: `the probe exited (${signal ?? code}) without a verdict` };
      resolve({
        ...parsed,
        log: log
          .split('\n')
          .filter((l) => !l.startsWith(PROBE_MARK))
          .join('\n'),
      });
    });
  });
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

/** The largest differences of `actual` from `expected`, and whether every element is within the tolerance. */
export function compareWithin(
  actual: Float32Array,
  expected: Float32Array,
): { within: boolean; maxAbs: number; maxRel: number; worst: number } {
  if (actual.length !== expected.length) throw new Error(`${actual.length} values answered, ${expected.length} expected`);
  let maxAbs = 0;
  let maxRel = 0;
  let worst = 0;
  for (let i = 0; i < actual.length; i++) {
    const diff = Math.abs(actual[i]! - expected[i]!);
    maxAbs = Math.max(maxAbs, diff);
    if (expected[i] !== 0) maxRel = Math.max(maxRel, diff / Math.abs(expected[i]!));
    worst = Math.max(worst, diff / (ATOL + RTOL * Math.abs(expected[i]!)));
  }
  return { within: worst <= 1, maxAbs, maxRel, worst };
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

async function startServer(args: Args, repo: string, extra: readonly string[]): Promise<ServerProcess> {
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
    {},
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
    await writeModel(probeFile, mlp({ layers: 2, width: 64 }));
    const gpu = { width, maxBatchSize: 64, ...gpuPlacement(args) };
    await addModel(repo, { name: 'mlp_gpu', modelFile, config: fp32Config('mlp_gpu', { ...gpu, batching: true }) });
    await addModel(repo, { name: 'mlp_gpu_unbatched', modelFile, config: fp32Config('mlp_gpu_unbatched', { ...gpu, batching: false }) });
    await addModel(repo, { name: 'mlp_cpu', modelFile, config: fp32Config('mlp_cpu', { width, maxBatchSize: 64, batching: true }) });
    r.lines.push(
      `MLP ${layers}x${width} FP32, ${modelBytes} bytes; mlp_gpu (KIND_GPU, webgpu, dynamic batching), mlp_gpu_unbatched (batching off), mlp_cpu (KIND_CPU twin).`,
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

  const baselineGpuBytes = await gpuMemoryUsedBytes();
  let server: ServerProcess | undefined;
  const serve = await report.step('serve (KIND_GPU on webgpu)', 120_000, async (r) => {
    server = await startServer(args, repo, []);
    for (const model of ['mlp_gpu', 'mlp_gpu_unbatched', 'mlp_cpu']) {
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
        for (const model of ['mlp_gpu', 'mlp_gpu_unbatched', 'mlp_cpu']) {
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
      for (let tries = 0; tries < 20; tries++) {
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
      const windows: WindowOptions = args.quick
        ? { warmupMs: 500, windowMs: 1500, minWindows: 1, maxWindows: 1, tolerance: 1 }
        : { warmupMs: 1500, windowMs: 3000, minWindows: 2, maxWindows: 4, tolerance: 0.1 };
      const results: Record<string, number> = {};
      const rows = [
        '| model | req/s | rows/s | p50 ms | p99 ms | errors | rows per execution |',
        '| --- | --- | --- | --- | --- | --- | --- |',
      ];
      for (const model of ['mlp_gpu', 'mlp_gpu_unbatched']) {
        const request = inferRequest({ httpUrl: s.httpUrl, grpcAddress: s.grpcAddress }, 'http-binary', model, width, CLIENTS);
        const before = await readCounts(s.httpUrl, model);
        const result = await measure(model, request.send, { concurrency: CLIENTS }, windows);
        const after = await readCounts(s.httpUrl, model);
        await request.close();
        results[model] = result.throughput;
        const perExecution = (after.inferences - before.inferences) / Math.max(1, after.executions - before.executions);
        rows.push(
          `| ${model} | ${result.throughput.toFixed(0)} | ${result.throughput.toFixed(0)} | ${result.latencyMs.p50.toFixed(2)} | ${result.latencyMs.p99.toFixed(2)} | ${result.errors} | ${perExecution.toFixed(1)} |`,
        );
        if (result.firstError) r.lines.push(`- ${model} first error: ${result.firstError}`);
      }
      r.lines.push('One row (1 x ' + width + ' FP32) a request over HTTP binary; rows/s = req/s.', '', ...rows);
      const gain = results['mlp_gpu']! / results['mlp_gpu_unbatched']!;
      r.summary = `dynamic batching ${results['mlp_gpu']!.toFixed(0)} req/s vs ${results['mlp_gpu_unbatched']!.toFixed(0)} unbatched: x${gain.toFixed(2)}`;
    });

    await report.step('GPU memory of the served models', 30_000, async (r) => {
      const used = await gpuMemoryUsedBytes();
      const own = await processGpuMemoryBytes(s.child.pid!);
      r.lines.push(
        `- GPU memory used before the server: ${baselineGpuBytes} bytes; with it (two KIND_GPU instances of ${modelBytes} bytes of weights): ${used} bytes`,
      );
      r.lines.push(`- the server's process as a compute app: ${own ?? 'not listed'} bytes`);
      r.summary = `delta ${used !== undefined && baselineGpuBytes !== undefined ? used - baselineGpuBytes : '?'} bytes; process ${own ?? 'not listed'}`;
    });
    await s.stop();
  }

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
} else {
  const args = parseArgs(argv);
  const code = await main(args).catch((error: Error) => {
    process.stderr.write(`gpu-check: ${error.stack ?? error.message}\n`);
    return 1;
  });
  process.exit(code);
}
