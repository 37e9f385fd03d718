import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { identity } from '@batchwise/modelgen';
import { measure, type LoadResult, type MeasureHooks, type WindowOptions } from '@batchwise/client/load';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { cpuShare, cpuSnapshot, type CpuShare } from '../cpu-usage.ts';
import { leanFp32Client } from '../lean-http.ts';
import { measureLean, type LeanReading } from '../lean-measure.ts';
import { environment, ratioCheck, reportScenario, type Check } from '../report.ts';
import { benchRepository, cachedModel, fp32Config, inferRequest, JS_IDENTITY, type Protocol } from '../workload.ts';

const WIDTH = 16;

/** What the lean client measures: the bare fastify echo, and the server on the ONNX identity and on a JavaScript one. */
export type OverheadTarget = 'echo' | 'onnx' | 'js';
export const OVERHEAD_TARGETS: readonly OverheadTarget[] = ['echo', 'onnx', 'js'];
/** The server's models (both 16 floats in and out, max_batch_size 64, batching with no delay). */
const MODEL_OF: Record<Exclude<OverheadTarget, 'echo'>, string> = { onnx: 'tiny', js: 'tiny_js' };

/** Issue 30's targets: at one client p50 and server CPU per request, at 16 clients server CPU per request, each over the echo's. */
const P50_OVER_ECHO_C1 = 1.5;
const CPU_OVER_ECHO_C1 = 1.5;
const CPU_OVER_ECHO_C16 = 1.2;

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

/** The bare fastify echo (bench/src/echo-server.ts) in a process of its own. */
export async function startEcho(): Promise<{ url: string; pid: number; stop(): void }> {
  const script = new URL('../echo-server.ts', import.meta.url).pathname;
  const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) => resolve((JSON.parse(line) as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`echo server exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, stop: () => child.kill('SIGTERM') };
}

/**
 * The server's own cost per request (issue 30): a 16-float identity as an ONNX model and as a
 * JavaScript model (`backend: "js"`, returning its input) against a bare fastify endpoint that
 * echoes the same bytes in the same reply shape, all three over HTTP binary with the lean client
 * (bench/src/lean-http.ts), at each concurrency. The echo and the server run side by side in
 * their own processes; each concurrency measures echo, ONNX, JS, then (`mirrored`) JS, ONNX, echo,
 * so a drift of the machine weighs on all three alike, and each ratio compares the means of the
 * two measurements. `protocols` other than http-binary (the `grpc` scenario) add the ONNX model
 * over gRPC at the highest concurrency, compared with its lean HTTP binary measurement there.
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
}): Promise<{ measurements: OverheadMeasurement[]; grpc: GrpcMeasurement[]; ratios: Record<string, number>; checks: Check[] }> {
  const { log } = options;
  const env = environment();
  const targets = options.targets ?? OVERHEAD_TARGETS;
  const file = await cachedModel('identity-fp32-16', () => identity('FP32', [WIDTH]), log);
  const config = { width: WIDTH, maxBatchSize: 64, batching: true, delayUs: 0 };
  const repo = await benchRepository('overhead', [
    { name: MODEL_OF.onnx, modelFile: file, config: fp32Config(MODEL_OF.onnx, config) },
    { name: MODEL_OF.js, modelMjs: JS_IDENTITY, config: fp32Config(MODEL_OF.js, { ...config, backend: 'js' }) },
  ]);
  const measurements: OverheadMeasurement[] = [];
  const grpc: GrpcMeasurement[] = [];
  const echo = await startEcho();
  let server: Awaited<ReturnType<typeof startServerProcess>> | undefined;
  try {
    server = await startServerProcess(['--model-repository', repo]);
    for (const concurrency of options.concurrencies) {
      const order = options.mirrored === false ? targets : [...targets, ...[...targets].reverse()];
      for (const target of order) {
        const url = target === 'echo' ? echo.url : server.httpUrl;
        const model = target === 'echo' ? MODEL_OF.onnx : MODEL_OF[target];
        const client = leanFp32Client(url, model, WIDTH);
        try {
          const reading = await measureLean(
            `${target} c=${concurrency}`,
            client,
            { concurrency },
            { ...options.windows, log },
            target === 'echo' ? { pid: echo.pid } : { pid: server.child.pid!, stats: { httpUrl: server.httpUrl, model } },
          );
          measurements.push({ target, concurrency, reading });
        } finally {
          client.close();
        }
      }
      if (concurrency !== Math.max(...options.concurrencies)) continue;
      for (const protocol of (options.protocols ?? []).filter((p) => p !== 'http-binary')) {
        grpc.push(await measureGrpc(server, protocol, concurrency, options.windows, log));
      }
    }
  } finally {
    echo.stop();
    await server?.stop();
  }

  const mean = (target: OverheadTarget, concurrency: number, of: (r: LeanReading) => number | undefined): number => {
    const values = measurements.filter((m) => m.target === target && m.concurrency === concurrency).map((m) => of(m.reading));
    return values.length === 0 || values.some((v) => v === undefined) ? NaN : values.reduce((a: number, b) => a + b!, 0) / values.length;
  };
  const ratios: Record<string, number> = {};
  const checks: Check[] = [];
  for (const c of options.concurrencies) {
    for (const target of targets.filter((t): t is 'onnx' | 'js' => t !== 'echo')) {
      const over = (of: (r: LeanReading) => number | undefined) => mean(target, c, of) / mean('echo', c, of);
      ratios[`p50_${target}_vs_echo_c${c}`] = over((r) => r.client.latencyMs.p50);
      ratios[`server_cpu_${target}_vs_echo_c${c}`] = over((r) => r.serverCpuMsPerAnswer);
      ratios[`throughput_${target}_vs_echo_c${c}`] = over((r) => r.client.throughput);
      if (c === 1) {
        checks.push(ratioCheck(`p50_${target}_vs_echo_c1`, ratios[`p50_${target}_vs_echo_c1`]!, { atMost: P50_OVER_ECHO_C1 }));
        checks.push(
          ratioCheck(`server_cpu_${target}_vs_echo_c1`, ratios[`server_cpu_${target}_vs_echo_c1`]!, { atMost: CPU_OVER_ECHO_C1 }),
        );
      }
      if (c === 16) {
        const name = `server_cpu_${target}_vs_echo_c16`;
        checks.push(ratioCheck(name, ratios[name]!, { atMost: CPU_OVER_ECHO_C16 }));
      }
    }
    for (const g of grpc.filter((x) => x.concurrency === c)) {
      const name = `${g.protocol.replace('-', '_')}${c === 16 ? '' : `_c${c}`}`;
      const httpCpu = mean('onnx', c, (r) => r.serverCpuMsPerAnswer);
      ratios[`${name}_vs_http_binary`] = g.client.throughput / mean('onnx', c, (r) => r.client.throughput);
      if (g.serverCpuMsPerRequest) ratios[`${name}_server_capacity_vs_http_binary`] = httpCpu / g.serverCpuMsPerRequest;
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
      m.target === 'echo' ? 'fastify echo' : `batchwise ${m.target}`,
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
  ];
  await reportScenario(
    {
      name: options.name ?? 'overhead',
      title: 'pnpm bench overhead: the 16-float identity (ONNX and JavaScript) against a bare fastify echo',
      intro:
        `HTTP binary, the lean client, closed loop; ${options.mirrored === false ? 'each target once' : 'echo, ONNX, JS, JS, ONNX, echo'} ` +
        `at each concurrency (${env['date']}).`,
      tables: [{ headers, rows }],
      notes: Object.entries(ratios)
        .filter(([k]) => !checks.some((c) => c.target.startsWith(`${k} `)))
        .map(([k, v]) => `${k}: ${v.toFixed(2)}`),
      checks,
      json: { concurrencies: options.concurrencies, environment: env, measurements, grpc, ratios, checks },
    },
    log,
  );
  return { measurements, grpc, ratios, checks };
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
