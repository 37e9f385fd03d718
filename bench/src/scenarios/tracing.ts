import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { identity } from '@batchwise/modelgen';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { measure, type LoadResult, type WindowOptions } from '../load-generator.ts';
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

/**
 * What tracing costs: a 16-float identity over HTTP binary at `concurrency`, on a server with
 * tracing off, exporting spans over OTLP HTTP for one request in 1000, and for every request.
 */
export async function runTracing(options: {
  concurrency: number;
  windows: WindowOptions;
  log: (line: string) => void;
  name?: string;
}): Promise<{ results: LoadResult[]; ratios: Record<string, number>; spans: Record<string, number> }> {
  const { log, concurrency } = options;
  const env = environment();
  const file = await cachedModel('identity-fp32-16', () => identity('FP32', [WIDTH]), log);
  const repo = await benchRepository('tracing', [
    { name: 'tiny', modelFile: file, config: fp32Config('tiny', { width: WIDTH, maxBatchSize: 64, batching: true, delayUs: 0 }) },
  ]);
  const receiver = await startReceiver();
  const results: LoadResult[] = [];
  const spans: Record<string, number> = {};
  try {
    for (const { label, traceConfig } of configurations(receiver.url)) {
      const server = await startServerProcess(['--model-repository', repo, ...traceConfig.flatMap((c) => ['--trace-config', c])]);
      const before = receiver.spans();
      try {
        const { send, close } = inferRequest(server, 'http-binary', 'tiny', WIDTH, concurrency);
        results.push(await measure(label, send, { concurrency }, { ...options.windows, log }));
        await close();
      } finally {
        // Stopping flushes the batch span processor: the spans of the run have arrived after it.
        await server.stop();
      }
      spans[label] = receiver.spans() - before;
    }
  } finally {
    await receiver.close();
  }
  const [off, rate1000, every] = results as [LoadResult, LoadResult, LoadResult];
  const ratios: Record<string, number> = {
    throughput_rate1000_vs_off: rate1000.throughput / off.throughput,
    throughput_every_vs_off: every.throughput / off.throughput,
    p99_rate1000_vs_off: rate1000.latencyMs.p99 / off.latencyMs.p99,
    p99_every_vs_off: every.latencyMs.p99 / off.latencyMs.p99,
  };
  log(
    `\n${table(
      ['server', 'infer/s', 'p50 ms', 'p99 ms', 'errors', 'spans received'],
      results.map((r) => [r.label, r.throughput, r.latencyMs.p50, r.latencyMs.p99, r.errors, spans[r.label] ?? 0]),
    )}\n`,
  );
  for (const [k, v] of Object.entries(ratios)) log(`${k}: ${v.toFixed(3)}`);
  await writeResult(options.name ?? 'tracing', { concurrency, environment: env, results, spans, ratios });
  return { results, ratios, spans };
}
