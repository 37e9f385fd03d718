import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { identity } from '@batchwise/modelgen';
import { cpuShare, cpuSnapshot, type CpuShare } from '../cpu-usage.ts';
import { measure, type LoadResult, type MeasureHooks, type WindowOptions } from '../load-generator.ts';
import { environment, table, writeResult } from '../report.ts';
import { startServerProcess } from '../server-process.ts';
import { benchRepository, cachedModel, fp32Config, inferRequest, type Protocol } from '../workload.ts';

const WIDTH = 16;

/** Hooks that measure the CPU share of the generator and `pid` (and of others) over the windows. */
function cpuProbe(pid: number, shares: Map<string, CpuShare>, label: string): MeasureHooks {
  let before: ReturnType<typeof cpuSnapshot>;
  return {
    onMeasureStart: async () => void (before = cpuSnapshot([process.pid, pid])),
    onMeasureEnd: async () => {
      const share = cpuShare(before, cpuSnapshot([process.pid, pid]));
      if (share) shares.set(label, share);
    },
  };
}

async function startEcho(): Promise<{ url: string; pid: number; stop(): void }> {
  const script = new URL('../echo-server.ts', import.meta.url).pathname;
  const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) => resolve((JSON.parse(line) as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`echo server exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, stop: () => child.kill('SIGTERM') };
}

/**
 * The server's own cost per request: a 16-float identity over HTTP binary (and gRPC when
 * asked) against a bare fastify endpoint that echoes the same bytes.
 */
export async function runOverhead(options: {
  concurrency: number;
  windows: WindowOptions;
  protocols?: readonly Protocol[];
  log: (line: string) => void;
  name?: string;
}): Promise<{ results: LoadResult[]; ratios: Record<string, number> }> {
  const { log, concurrency } = options;
  const env = environment();
  const file = await cachedModel('identity-fp32-16', () => identity('FP32', [WIDTH]), log);
  const repo = await benchRepository('overhead', [
    { name: 'tiny', modelFile: file, config: fp32Config('tiny', { width: WIDTH, maxBatchSize: 64, batching: true, delayUs: 0 }) },
  ]);
  const results: LoadResult[] = [];
  const cpu = new Map<string, CpuShare>();
  const echo = await startEcho();
  try {
    const { send, close } = inferRequest({ httpUrl: echo.url, grpcAddress: '' }, 'http-binary', 'tiny', WIDTH, concurrency);
    const label = 'fastify echo http-binary';
    results.push(await measure(label, send, { concurrency }, { ...options.windows, log }, cpuProbe(echo.pid, cpu, label)));
    await close();
  } finally {
    echo.stop();
  }
  const server = await startServerProcess(['--model-repository', repo]);
  try {
    for (const protocol of options.protocols ?? ['http-binary']) {
      const { send, close } = inferRequest(server, protocol, 'tiny', WIDTH, concurrency);
      const label = `batchwise ${protocol}`;
      results.push(await measure(label, send, { concurrency }, { ...options.windows, log }, cpuProbe(server.child.pid!, cpu, label)));
      await close();
    }
  } finally {
    await server.stop();
  }
  const echoResult = results[0]!;
  const ratios: Record<string, number> = {};
  for (const r of results.slice(1)) ratios[`${r.label.replace('batchwise ', '')}_vs_echo`] = r.throughput / echoResult.throughput;
  const http = results.find((r) => r.label === 'batchwise http-binary');
  for (const grpc of results.filter((r) => r.label.startsWith('batchwise grpc'))) {
    if (http) ratios[`${grpc.label.replace('batchwise ', '').replace('-', '_')}_vs_http_binary`] = grpc.throughput / http.throughput;
  }
  log(
    `\n${table(
      ['target', 'infer/s', 'p50 ms', 'p99 ms', 'errors', 'own cpu', 'other cpu'],
      results.map((r) => [r.label, r.throughput, r.latencyMs.p50, r.latencyMs.p99, r.errors, cpu.get(r.label)?.ownCores ?? '', cpu.get(r.label)?.otherCores ?? '']),
    )}\n`,
  );
  for (const [k, v] of Object.entries(ratios)) log(`${k}: ${v.toFixed(2)}`);
  await writeResult(options.name ?? 'overhead', { concurrency, environment: env, results, cpu: Object.fromEntries(cpu), ratios });
  return { results, ratios };
}
