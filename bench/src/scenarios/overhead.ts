import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { identity } from '@batchwise/modelgen';
import { cpuShare, cpuSnapshot, type CpuShare } from '../cpu-usage.ts';
import { measure, type LoadResult, type MeasureHooks, type WindowOptions } from '@batchwise/client/load';
import { environment, table, writeResult } from '../report.ts';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { breakdown, readStats, type ServerBreakdown } from '../server-stats.ts';
import { benchRepository, cachedModel, fp32Config, inferRequest, type Protocol } from '../workload.ts';

const WIDTH = 16;

interface WindowReadings {
  cpu?: CpuShare;
  /** Batchwise only: its statistics over the windows (batch size tells how much of the run time a request shares). */
  server?: ServerBreakdown;
}

/** Hooks that read, over the measured windows, the CPU of the generator and of `pid`, and the model's statistics where given. */
function windowProbe(
  pid: number,
  readings: Map<string, WindowReadings>,
  label: string,
  stats?: { httpUrl: string; model: string },
): MeasureHooks {
  let cpuBefore: ReturnType<typeof cpuSnapshot>;
  let statsBefore: Awaited<ReturnType<typeof readStats>> | undefined;
  return {
    onMeasureStart: async () => {
      if (stats) statsBefore = await readStats(stats.httpUrl, stats.model);
      cpuBefore = cpuSnapshot([process.pid, pid]);
    },
    onMeasureEnd: async () => {
      const cpu = cpuShare(cpuBefore, cpuSnapshot([process.pid, pid]));
      const server = stats && statsBefore ? breakdown(statsBefore, await readStats(stats.httpUrl, stats.model)) : undefined;
      readings.set(label, { ...(cpu && { cpu }), ...(server && { server }) });
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
  const readings = new Map<string, WindowReadings>();
  const echo = await startEcho();
  try {
    const { send, close } = inferRequest({ httpUrl: echo.url, grpcAddress: '' }, 'http-binary', 'tiny', WIDTH, concurrency);
    const label = 'fastify echo http-binary';
    results.push(await measure(label, send, { concurrency }, { ...options.windows, log }, windowProbe(echo.pid, readings, label)));
    await close();
  } finally {
    echo.stop();
  }
  const server = await startServerProcess(['--model-repository', repo]);
  try {
    for (const protocol of options.protocols ?? ['http-binary']) {
      const { send, close } = inferRequest(server, protocol, 'tiny', WIDTH, concurrency);
      const label = `batchwise ${protocol}`;
      results.push(
        await measure(
          label,
          send,
          { concurrency },
          { ...options.windows, log },
          windowProbe(server.child.pid!, readings, label, { httpUrl: server.httpUrl, model: 'tiny' }),
        ),
      );
      await close();
    }
  } finally {
    await server.stop();
  }
  // The server's CPU time per request does not depend on how much CPU the client takes from
  // it on these shared cores: 1 / it is the request rate one server core could sustain.
  const serverCpuMs = (r: LoadResult): number | undefined => {
    const cores = readings.get(r.label)?.cpu?.pidCores[1];
    return cores === undefined || r.throughput === 0 ? undefined : (cores * 1000) / r.throughput;
  };
  const echoResult = results[0]!;
  const ratios: Record<string, number> = {};
  for (const r of results.slice(1)) ratios[`${r.label.replace('batchwise ', '')}_vs_echo`] = r.throughput / echoResult.throughput;
  const http = results.find((r) => r.label === 'batchwise http-binary');
  for (const grpc of results.filter((r) => r.label.startsWith('batchwise grpc'))) {
    if (!http) continue;
    const name = grpc.label.replace('batchwise ', '').replace('-', '_');
    ratios[`${name}_vs_http_binary`] = grpc.throughput / http.throughput;
    const [httpCpu, grpcCpu] = [serverCpuMs(http), serverCpuMs(grpc)];
    if (httpCpu && grpcCpu) ratios[`${name}_server_capacity_vs_http_binary`] = httpCpu / grpcCpu;
  }
  log(
    `\n${table(
      ['target', 'infer/s', 'p50 ms', 'p99 ms', 'errors', 'avg batch', 'server cpu ms/req', 'own cpu', 'other cpu'],
      results.map((r) => [
        r.label,
        r.throughput,
        r.latencyMs.p50,
        r.latencyMs.p99,
        r.errors,
        readings.get(r.label)?.server?.avgBatchSize ?? '',
        serverCpuMs(r)?.toFixed(3) ?? '',
        readings.get(r.label)?.cpu?.ownCores ?? '',
        readings.get(r.label)?.cpu?.otherCores ?? '',
      ]),
    )}\n`,
  );
  for (const [k, v] of Object.entries(ratios)) log(`${k}: ${v.toFixed(2)}`);
  const serverCpuMsPerRequest = Object.fromEntries(results.map((r) => [r.label, serverCpuMs(r)]));
  await writeResult(options.name ?? 'overhead', {
    concurrency,
    environment: env,
    results,
    readings: Object.fromEntries(readings),
    serverCpuMsPerRequest,
    ratios,
  });
  return { results, ratios };
}
