import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { identity } from '@batchwise/modelgen';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { cpuShare, cpuSnapshot, type CpuShare } from '../cpu-usage.ts';
import { measure, type LoadResult, type MeasureHooks, type WindowOptions } from '@batchwise/client/load';
import { environment, table, writeResult } from '../report.ts';
import { benchRepository, cachedModel, fp32Config, inferRequest } from '../workload.ts';

const WIDTH = 16;

/** An OTLP HTTP traces receiver on loopback that counts the spans of every export (OTLP JSON). */
async function startReceiver(): Promise<{ url: string; spans(): number; close(): Promise<void> }> {
  let spans = 0;
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceSpans?: { scopeSpans?: { spans?: unknown[] }[] }[];
        };
        for (const r of body.resourceSpans ?? []) for (const s of r.scopeSpans ?? []) spans += s.spans?.length ?? 0;
      } catch {
        // Counted as nothing: the exporter's body was not JSON.
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    spans: () => spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The three servers compared: tracing off (the default), OpenTelemetry at Triton's default rate, and every request traced. */
function configurations(url: string): { label: string; traceConfig: string[] }[] {
  const otel = ['mode=opentelemetry', `opentelemetry,url=${url}`, 'level=TIMESTAMPS'];
  return [
    { label: 'tracing off', traceConfig: [] },
    { label: 'opentelemetry rate=1000', traceConfig: [...otel, 'rate=1000'] },
    { label: 'opentelemetry rate=1', traceConfig: [...otel, 'rate=1'] },
  ];
}

/** Reads the CPU of the generator and of the server `pid` over the measured windows. */
function cpuProbe(pid: number, done: (cpu: CpuShare | undefined) => void): MeasureHooks {
  let before: ReturnType<typeof cpuSnapshot>;
  return {
    onMeasureStart: async () => void (before = cpuSnapshot([process.pid, pid])),
    onMeasureEnd: async () => done(cpuShare(before, cpuSnapshot([process.pid, pid]))),
  };
}

export interface TracingMeasurement {
  readonly result: LoadResult;
  /** The server's CPU time per request (ms): what tracing adds, whatever else shares the cores. */
  readonly serverCpuMsPerRequest: number | undefined;
  readonly otherCores: number | undefined;
  readonly spans: number;
}

/**
 * What tracing costs: a 16-float identity over HTTP binary at `concurrency`, on a server with
 * tracing off, exporting spans over OTLP HTTP for one request in 1000, and for every request.
 */
export async function runTracing(options: {
  concurrency: number;
  windows: WindowOptions;
  log: (line: string) => void;
  name?: string;
  /**
   * Each configuration twice, in mirrored order (off, 1000, 1, 1, 1000, off), so a drift of the
   * machine's speed during the run weighs on every configuration alike; false: once each (smoke).
   * @default true
   */
  mirrored?: boolean;
}): Promise<{ measurements: TracingMeasurement[]; ratios: Record<string, number> }> {
  const { log, concurrency } = options;
  const env = environment();
  const file = await cachedModel('identity-fp32-16', () => identity('FP32', [WIDTH]), log);
  const repo = await benchRepository('tracing', [
    { name: 'tiny', modelFile: file, config: fp32Config('tiny', { width: WIDTH, maxBatchSize: 64, batching: true, delayUs: 0 }) },
  ]);
  const receiver = await startReceiver();
  const measurements: TracingMeasurement[] = [];
  const configs = configurations(receiver.url);
  try {
    for (const { label, traceConfig } of options.mirrored === false ? configs : [...configs, ...[...configs].reverse()]) {
      const server = await startServerProcess(['--model-repository', repo, ...traceConfig.flatMap((c) => ['--trace-config', c])]);
      const before = receiver.spans();
      let cpu: CpuShare | undefined;
      let result: LoadResult;
      try {
        const { send, close } = inferRequest(server, 'http-binary', 'tiny', WIDTH, concurrency);
        // One request first, as the other scenarios send: the windows measure a server that has answered once.
        await send();
        result = await measure(
          label,
          send,
          { concurrency },
          { ...options.windows, log },
          cpuProbe(server.child.pid!, (c) => (cpu = c)),
        );
        await close();
      } finally {
        // Stopping flushes the batch span processor: the spans of the run have arrived after it.
        await server.stop();
      }
      const serverCores = cpu?.pidCores[1];
      measurements.push({
        result,
        serverCpuMsPerRequest: serverCores === undefined || result.throughput === 0 ? undefined : (serverCores * 1000) / result.throughput,
        otherCores: cpu?.otherCores,
        spans: receiver.spans() - before,
      });
    }
  } finally {
    await receiver.close();
  }
  const mean = (label: string, of: (m: TracingMeasurement) => number | undefined): number => {
    const values = measurements.filter((m) => m.result.label === label).map(of);
    return values.some((v) => v === undefined) ? NaN : values.reduce((a: number, b) => a + b!, 0) / values.length;
  };
  const [off, rate1000, every] = configs.map((c) => c.label) as [string, string, string];
  const ratio = (label: string, of: (m: TracingMeasurement) => number | undefined) => mean(label, of) / mean(off, of);
  const ratios: Record<string, number> = {
    throughput_rate1000_vs_off: ratio(rate1000, (m) => m.result.throughput),
    throughput_every_vs_off: ratio(every, (m) => m.result.throughput),
    p99_rate1000_vs_off: ratio(rate1000, (m) => m.result.latencyMs.p99),
    p99_every_vs_off: ratio(every, (m) => m.result.latencyMs.p99),
    server_cpu_per_request_rate1000_vs_off: ratio(rate1000, (m) => m.serverCpuMsPerRequest),
    server_cpu_per_request_every_vs_off: ratio(every, (m) => m.serverCpuMsPerRequest),
  };
  log(
    `\n${table(
      ['server', 'infer/s', 'p50 ms', 'p99 ms', 'errors', 'server cpu ms/req', 'other cpu', 'spans received'],
      measurements.map((m) => [
        m.result.label,
        m.result.throughput,
        m.result.latencyMs.p50,
        m.result.latencyMs.p99,
        m.result.errors,
        m.serverCpuMsPerRequest?.toFixed(3) ?? '',
        m.otherCores ?? '',
        m.spans,
      ]),
    )}\n`,
  );
  for (const [k, v] of Object.entries(ratios)) log(`${k}: ${v.toFixed(3)}`);
  await writeResult(options.name ?? 'tracing', { concurrency, environment: env, measurements, ratios });
  return { measurements, ratios };
}
