import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { identity } from '@batchwise/modelgen';
import { measure, type LoadResult, type MeasureHooks, type WindowOptions } from '@batchwise/client/load';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { cpuShare, cpuSnapshot, type CpuShare } from '../cpu-usage.ts';
import { leanFp32Client } from '../lean-http.ts';
import { measureLean, type LeanReading } from '../lean-measure.ts';
import { environment, ratioCheck, reportScenario, uncheckedRatioNotes, type Check } from '../report.ts';
import { benchRepository, cachedModel, fp32Config, inferRequest, JS_IDENTITY, type Protocol } from '../workload.ts';
import { TICKS_PER_SECOND } from '../threads.ts';
import { wrkInstalled, wrkLatency, wrkScript, type WrkLatency } from './wrk-check.ts';

/** The identity's width: 16 FP32 values a row, in and out. */
export const OVERHEAD_WIDTH = 16;
const WIDTH = OVERHEAD_WIDTH;

/**
 * What the lean client measures: the bare fastify echo, the server on the ONNX identity and on a
 * JavaScript one, and the naive peer (fastify + onnxruntime-node on the same ONNX file, no batching).
 */
export type OverheadTarget = 'echo' | 'onnx' | 'js' | 'naive';
export const OVERHEAD_TARGETS: readonly OverheadTarget[] = ['echo', 'onnx', 'js', 'naive'];
/** The server's models (both 16 floats in and out, max_batch_size 64, batching with no delay). */
export const OVERHEAD_MODELS: Readonly<Record<'onnx' | 'js', string>> = { onnx: 'tiny', js: 'tiny_js' };
const MODEL_OF = OVERHEAD_MODELS;

/**
 * Issue 34's targets, ratios of one run: the server's CPU per request over the echo's at 16 and at
 * one client, p50 over the echo's at one client (ONNX and JavaScript each), and the ONNX model's
 * throughput at 16 clients over the naive peer's.
 */
export const OVERHEAD_TARGETS_34 = { cpuOverEchoC16: 1.3, cpuOverEchoC1: 2.5, p50OverEchoC1: 2, throughputOverNaiveC16: 1.2 } as const;

/**
 * Issue 44's one-connection targets, measured with wrk (a C client: a Node client's own latency hides the
 * server's): the ONNX model's p50 and server CPU per request at most the naive peer's, and each model's p50 at
 * most 2x the echo's.
 */
export const OVERHEAD_TARGETS_44 = { overNaiveC1: 1, p50OverEchoC1: 2 } as const;

/** One wrk measurement at one connection: its latency and rate, and the answering process's CPU per request. */
export interface WrkMeasurement {
  readonly target: OverheadTarget;
  readonly reading: WrkLatency;
  readonly cpuUsPerRequest: number;
}

/** `pnpm bench overhead --quick`, the check before a commit that touches the request path: short windows. */
export const QUICK_WINDOWS: WindowOptions = { warmupMs: 250, windowMs: 750, minWindows: 2, maxWindows: 2, tolerance: 1 };

export interface OverheadMeasurement {
  readonly target: OverheadTarget;
  readonly concurrency: number;
  readonly reading: LeanReading;
}

/** gRPC on the ONNX model (the `grpc` scenario), with @batchwise/client or the lean raw client. */
export interface GrpcMeasurement {
  readonly protocol: Protocol;
  readonly concurrency: number;
  readonly client: LoadResult;
  readonly cpu?: CpuShare;
  readonly serverCpuMsPerRequest?: number;
}

/** A peer of the server (bench/src/peer-server.ts) in a process of its own. */
export interface Peer {
  readonly url: string;
  readonly pid: number;
  stop(): void;
}

/** Runs `script` (relative to bench/src) through tsx with `args` and waits for the {"port": N} it prints. */
export async function startPeer(script: string, args: readonly string[] = []): Promise<Peer> {
  const path = new URL(`../${script}`, import.meta.url).pathname;
  const child = spawn(process.execPath, ['--import', 'tsx', path, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) => resolve((JSON.parse(line) as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`${script} exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, stop: () => child.kill('SIGTERM') };
}

/** The bare fastify echo (bench/src/echo-server.ts). */
export const startEcho = (): Promise<Peer> => startPeer('echo-server.ts');

/** The naive peer (bench/src/naive-server.ts) serving the ONNX file at `modelFile`. */
export const startNaive = (modelFile: string): Promise<Peer> => startPeer('naive-server.ts', [modelFile]);

/** The 16-float FP32 identity of `overhead` (generated into bench/.cache/ once). */
export const tinyModelFile = (log: (line: string) => void): Promise<string> =>
  cachedModel('identity-fp32-16', () => identity('FP32', [WIDTH]), log);

/**
 * The overhead repository, written into bench/.cache/repos/<scenario>/ (emptied first): `tiny`, the
 * 16-float identity as an ONNX model, and `tiny_js`, a JavaScript model returning its input, both
 * `max_batch_size: 64` with batching and no delay. Resolves with the folder and the ONNX file.
 */
export async function overheadRepository(scenario: string, log: (line: string) => void): Promise<{ repo: string; modelFile: string }> {
  const modelFile = await tinyModelFile(log);
  const config = { width: WIDTH, maxBatchSize: 64, batching: true, delayUs: 0 };
  const repo = await benchRepository(scenario, [
    { name: MODEL_OF.onnx, modelFile, config: fp32Config(MODEL_OF.onnx, config) },
    { name: MODEL_OF.js, modelMjs: JS_IDENTITY, config: fp32Config(MODEL_OF.js, { ...config, backend: 'js' }) },
  ]);
  return { repo, modelFile };
}

/**
 * The server's own cost per request (issues 30 and 34): a 16-float identity as an ONNX model and as
 * a JavaScript model (`backend: "js"`, returning its input) against a bare fastify endpoint that
 * echoes the same bytes in the same reply shape, and against the naive peer (fastify +
 * onnxruntime-node running the same ONNX file in its route, no batching), all over HTTP binary with
 * the lean client (bench/src/lean-http.ts), at each concurrency. The echo, the naive peer and the
 * server run side by side in their own processes; each concurrency measures echo, ONNX, JS, naive,
 * then (`mirrored`) naive, JS, ONNX, echo, so a drift of the machine weighs on all alike, and each
 * ratio compares the means of the two measurements. `protocols` other than http-binary (the `grpc`
 * scenario) add the ONNX model over gRPC at the highest concurrency, compared with its lean HTTP
 * binary measurement there.
 */
export async function runOverhead(options: {
  concurrencies: readonly number[];
  windows: WindowOptions;
  protocols?: readonly Protocol[];
  /** @default OVERHEAD_TARGETS */
  targets?: readonly OverheadTarget[];
  /** @default true */
  mirrored?: boolean;
  log: (line: string) => void;
  name?: string;
  /** Seconds of each wrk measurement at one connection (issue 44), where wrk is installed; 0 skips them. @default 0 */
  wrkSeconds?: number;
  /** Rounds of the wrk measurements, each in an order reversed from the last. @default 2 */
  wrkRounds?: number;
}): Promise<{
  measurements: OverheadMeasurement[];
  grpc: GrpcMeasurement[];
  wrk: WrkMeasurement[];
  ratios: Record<string, number>;
  checks: Check[];
}> {
  const { log } = options;
  const env = environment();
  const targets = options.targets ?? OVERHEAD_TARGETS;
  const { repo, modelFile: file } = await overheadRepository('overhead', log);
  const measurements: OverheadMeasurement[] = [];
  const grpc: GrpcMeasurement[] = [];
  const wrk: WrkMeasurement[] = [];
  const wrkSeconds = options.wrkSeconds ?? 0;
  const useWrk = wrkSeconds > 0 && (await wrkInstalled());
  if (wrkSeconds > 0 && !useWrk) log('wrk is not installed (apt-get install wrk): the one-connection wrk checks are skipped');
  // The processes start at once; each that started is stopped at the end, whether or not the others did.
  const echoStart = startEcho();
  const naiveStart = targets.includes('naive') ? startNaive(file) : Promise.resolve(undefined);
  const serverStart = startServerProcess(['--model-repository', repo]);
  try {
    const [echo, naive, server] = await Promise.all([echoStart, naiveStart, serverStart]);
    /** Measures `target` at `concurrency` with a lean client of its own. */
    const measureTarget = async (
      target: OverheadTarget,
      concurrency: number,
      windows: WindowOptions,
      label = `${target} c=${concurrency}`,
    ): Promise<LeanReading> => {
      const peer = target === 'echo' ? echo : target === 'naive' ? naive! : undefined;
      const model = peer ? MODEL_OF.onnx : MODEL_OF[target as 'onnx' | 'js'];
      const client = leanFp32Client(peer?.url ?? server.httpUrl, model, WIDTH);
      try {
        const probe = peer ? { pid: peer.pid } : { pid: server.child.pid!, stats: { httpUrl: server.httpUrl, model } };
        return await measureLean(label, client, { concurrency }, { ...windows, log }, probe);
      } finally {
        client.close();
      }
    };
    // A process just started is slower at first (likely V8 compiling its hot paths on threads of its own, and ONNX
    // Runtime's first runs): with short windows the first target measured came out at up to 3x its mirror's CPU per
    // request. One unrecorded window of each at the top concurrency first, so that none is measured cold.
    const top = Math.max(...options.concurrencies);
    const priming = { ...options.windows, warmupMs: 0, minWindows: 1, maxWindows: 1 };
    for (const target of targets) await measureTarget(target, top, priming, `priming ${target} c=${top}`);
    for (const concurrency of options.concurrencies) {
      const order = options.mirrored === false ? targets : [...targets, ...[...targets].reverse()];
      for (const target of order) {
        measurements.push({ target, concurrency, reading: await measureTarget(target, concurrency, options.windows) });
      }
      if (concurrency !== top) continue;
      for (const protocol of (options.protocols ?? []).filter((p) => p !== 'http-binary')) {
        grpc.push(await measureGrpc(server, protocol, concurrency, options.windows, log));
      }
    }
    if (useWrk) {
      const scripts = { onnx: await wrkScript(MODEL_OF.onnx, WIDTH), js: await wrkScript(MODEL_OF.js, WIDTH) };
      for (let round = 0; round < (options.wrkRounds ?? 2); round++) {
        for (const target of round % 2 === 0 ? targets : [...targets].reverse()) {
          const peer = target === 'echo' ? echo : target === 'naive' ? naive! : undefined;
          const model = peer ? MODEL_OF.onnx : MODEL_OF[target as 'onnx' | 'js'];
          const pid = peer?.pid ?? server.child.pid!;
          const before = cpuSnapshot([pid]);
          const reading = await wrkLatency(
            peer?.url ?? server.httpUrl,
            model,
            scripts[model === MODEL_OF.js ? 'js' : 'onnx'],
            1,
            wrkSeconds,
          );
          const after = cpuSnapshot([pid]);
          const cpuSeconds = ((after?.pidTicks[0] ?? NaN) - (before?.pidTicks[0] ?? NaN)) / TICKS_PER_SECOND;
          const cpuUsPerRequest = (cpuSeconds * 1e6) / (reading.perSecond * wrkSeconds);
          log(
            `  wrk ${target} c=1: p50 ${reading.p50Ms.toFixed(3)} ms, ${reading.perSecond.toFixed(0)}/s, ${cpuUsPerRequest.toFixed(0)} us/req`,
          );
          wrk.push({ target, reading, cpuUsPerRequest });
        }
      }
    }
  } finally {
    await Promise.allSettled([echoStart.then((p) => p.stop()), naiveStart.then((p) => p?.stop()), serverStart.then((s) => s.stop())]);
  }

  const mean = (target: OverheadTarget, concurrency: number, of: (r: LeanReading) => number | undefined): number => {
    const values = measurements.filter((m) => m.target === target && m.concurrency === concurrency).map((m) => of(m.reading));
    return values.length === 0 || values.some((v) => v === undefined) ? NaN : values.reduce((a: number, b) => a + b!, 0) / values.length;
  };
  const ratios: Record<string, number> = {};
  const checks: Check[] = [];
  const check = (name: string, bound: { atMost: number } | { atLeast: number }) => checks.push(ratioCheck(name, ratios[name]!, bound));
  const T = OVERHEAD_TARGETS_34;
  for (const c of options.concurrencies) {
    for (const target of targets.filter((t) => t !== 'echo')) {
      const over = (of: (r: LeanReading) => number | undefined) => mean(target, c, of) / mean('echo', c, of);
      ratios[`p50_${target}_vs_echo_c${c}`] = over((r) => r.client.latencyMs.p50);
      ratios[`server_cpu_${target}_vs_echo_c${c}`] = over((r) => r.serverCpuMsPerAnswer);
      ratios[`throughput_${target}_vs_echo_c${c}`] = over((r) => r.client.throughput);
      if (target === 'naive') continue;
      if (c === 1) {
        check(`p50_${target}_vs_echo_c1`, { atMost: T.p50OverEchoC1 });
        check(`server_cpu_${target}_vs_echo_c1`, { atMost: T.cpuOverEchoC1 });
      }
      if (c === 16) check(`server_cpu_${target}_vs_echo_c16`, { atMost: T.cpuOverEchoC16 });
    }
    if (targets.includes('onnx') && targets.includes('naive')) {
      const throughput = (r: LeanReading) => r.client.throughput;
      ratios[`throughput_onnx_vs_naive_c${c}`] = mean('onnx', c, throughput) / mean('naive', c, throughput);
      if (c === 16) check('throughput_onnx_vs_naive_c16', { atLeast: T.throughputOverNaiveC16 });
    }
    for (const g of grpc.filter((x) => x.concurrency === c)) {
      const name = `${g.protocol.replace('-', '_')}${c === 16 ? '' : `_c${c}`}`;
      const httpCpu = mean('onnx', c, (r) => r.serverCpuMsPerAnswer);
      ratios[`${name}_vs_http_binary`] = g.client.throughput / mean('onnx', c, (r) => r.client.throughput);
      if (g.serverCpuMsPerRequest) ratios[`${name}_server_capacity_vs_http_binary`] = httpCpu / g.serverCpuMsPerRequest;
    }
  }

  if (wrk.length > 0) {
    const median = (target: OverheadTarget, of: (m: WrkMeasurement) => number): number => {
      const values = wrk
        .filter((m) => m.target === target)
        .map(of)
        .sort((a, b) => a - b);
      return values.length === 0 ? NaN : values[(values.length - 1) >> 1]!;
    };
    const p50 = (t: OverheadTarget) => median(t, (m) => m.reading.p50Ms);
    const cpu = (t: OverheadTarget) => median(t, (m) => m.cpuUsPerRequest);
    const W = OVERHEAD_TARGETS_44;
    for (const target of targets.filter((t) => t !== 'echo')) {
      ratios[`wrk_p50_${target}_vs_echo_c1`] = p50(target) / p50('echo');
      ratios[`wrk_cpu_${target}_vs_echo_c1`] = cpu(target) / cpu('echo');
      if (target !== 'naive') check(`wrk_p50_${target}_vs_echo_c1`, { atMost: W.p50OverEchoC1 });
    }
    if (targets.includes('naive') && targets.includes('onnx')) {
      ratios['wrk_p50_onnx_vs_naive_c1'] = p50('onnx') / p50('naive');
      ratios['wrk_cpu_onnx_vs_naive_c1'] = cpu('onnx') / cpu('naive');
      check('wrk_p50_onnx_vs_naive_c1', { atMost: W.overNaiveC1 });
      check('wrk_cpu_onnx_vs_naive_c1', { atMost: W.overNaiveC1 });
    }
  }

  const headers = [
    'target',
    'clients',
    'infer/s',
    'p50 ms',
    'p99 ms',
    'errors',
    'avg batch',
    'server cpu us/req',
    'client cpu',
    'other cpu',
  ];
  const rows: (string | number)[][] = [
    ...measurements.map((m) => [
      m.target === 'echo' ? 'fastify echo' : m.target === 'naive' ? 'naive fastify+ort' : `batchwise ${m.target}`,
      m.concurrency,
      m.reading.client.throughput,
      // Three decimals: the echo answers in tens of microseconds.
      m.reading.client.latencyMs.p50.toFixed(3),
      m.reading.client.latencyMs.p99.toFixed(3),
      m.reading.client.errors,
      m.reading.server?.avgBatchSize ?? '',
      m.reading.serverCpuMsPerAnswer === undefined ? '' : Math.round(m.reading.serverCpuMsPerAnswer * 1000),
      m.reading.clientCores,
      m.reading.otherCores ?? '',
    ]),
    ...grpc.map((g) => [
      `batchwise onnx ${g.protocol}`,
      g.concurrency,
      g.client.throughput,
      g.client.latencyMs.p50.toFixed(3),
      g.client.latencyMs.p99.toFixed(3),
      g.client.errors,
      '',
      g.serverCpuMsPerRequest === undefined ? '' : Math.round(g.serverCpuMsPerRequest * 1000),
      '',
      g.cpu?.otherCores ?? '',
    ]),
    ...wrk.map((w) => [
      `${w.target === 'echo' ? 'fastify echo' : w.target === 'naive' ? 'naive fastify+ort' : `batchwise ${w.target}`} (wrk)`,
      1,
      w.reading.perSecond,
      w.reading.p50Ms.toFixed(3),
      w.reading.p99Ms.toFixed(3),
      w.reading.errors,
      '',
      Math.round(w.cpuUsPerRequest),
      '',
      '',
    ]),
  ];
  await reportScenario(
    {
      name: options.name ?? 'overhead',
      title:
        'pnpm bench overhead: the 16-float identity (ONNX and JavaScript) against a bare fastify echo and a naive fastify + ONNX Runtime peer',
      intro:
        `HTTP binary, the lean client, closed loop; ${options.mirrored === false ? 'each target once' : 'each target, then each again in reverse order'} ` +
        `(${targets.join(', ')}) at each concurrency, windows of ${options.windows.windowMs} ms (${env['date']}).`,
      tables: [{ headers, rows }],
      notes: uncheckedRatioNotes(ratios, checks),
      checks,
      json: { concurrencies: options.concurrencies, environment: env, measurements, grpc, wrk, ratios, checks },
    },
    log,
  );
  return { measurements, grpc, wrk, ratios, checks };
}

/** The ONNX model over gRPC (@batchwise/client's grpc-js client, or the lean raw one), with the server's CPU per request. */
async function measureGrpc(
  server: { httpUrl: string; grpcAddress: string; child: { pid?: number } },
  protocol: Protocol,
  concurrency: number,
  windows: WindowOptions,
  log: (line: string) => void,
): Promise<GrpcMeasurement> {
  const pids = [process.pid, server.child.pid!];
  let before: ReturnType<typeof cpuSnapshot>;
  let cpu: CpuShare | undefined;
  const hooks: MeasureHooks = {
    onMeasureStart: async () => void (before = cpuSnapshot(pids)),
    onMeasureEnd: async () => void (cpu = cpuShare(before, cpuSnapshot(pids))),
  };
  const { send, close } = inferRequest(server, protocol, MODEL_OF.onnx, WIDTH, concurrency);
  try {
    // Requests first, one per connection the client may open (up to 4, round robin): connecting is not a
    // window's to pay (a smoke window of 100 ms on a busy 2-core CI machine saw no answer while grpc-js
    // connected; a quick window of grpc-raw saw none once beside the full suite, with one connection warmed).
    await Promise.all(Array.from({ length: Math.min(4, concurrency) }, () => send()));
    const client = await measure(`onnx ${protocol} c=${concurrency}`, send, { concurrency }, { ...windows, log }, hooks);
    const cores = cpu?.pidCores[1];
    return {
      protocol,
      concurrency,
      client,
      ...(cpu && { cpu }),
      ...(cores !== undefined && client.throughput > 0 && { serverCpuMsPerRequest: (cores * 1000) / client.throughput }),
    };
  } finally {
    await close();
  }
}
