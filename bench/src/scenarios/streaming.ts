import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HttpClient } from '@batchwise/client';
import { summarize } from '@batchwise/client/load';
import { startServerProcess, type ServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { environment, ratioCheck, reportScenario } from '../report.ts';
import { breakdown, readStats, type ServerBreakdown } from '../server-stats.ts';
import { EXAMPLE_REPOSITORY } from './ensemble.ts';

/** The load: 1 and 16 concurrent streams of 64 tokens each. */
export const STREAMING = { concurrencies: [1, 16], tokens: 64 } as const;

/** The models served: the example's decoupled text generator and the next-token model it calls. */
const MODELS = ['next_token', 'text_generation'] as const;
const PROMPTS = ['the ', 'when a client', 'a batch of', 'streams share', 'the server', 'a model that', 'each token', 'requests'];

export interface StreamingPoint {
  readonly concurrency: number;
  readonly streams: number;
  readonly tokens: number;
  readonly errors: number;
  readonly firstError?: string;
  readonly seconds: number;
  readonly tokensPerSecond: number;
  /** From sending a request to its first token, ms. */
  readonly firstTokenMs: { readonly p50: number; readonly p99: number };
  /** Between one token of a stream and its next, ms. */
  readonly betweenTokensMs: { readonly p50: number; readonly p99: number };
  /** The next-token model over the measurement (its mean batch among them). */
  readonly nextToken: ServerBreakdown;
}

export interface StreamingResult {
  readonly points: StreamingPoint[];
  readonly ratio: number;
  readonly pass: { readonly throughput: boolean; readonly batch: boolean };
}

/**
 * `pnpm bench streaming`: the text_generation example (examples/model_repository) served by the
 * compiled server; `concurrency` clients each open generate_stream requests of `tokens` tokens one
 * after another over HTTP (Server-Sent Events) for `durationMs`; tokens per second in all, time to
 * first token p50/p99, time between tokens p50/p99, and the next-token model's mean batch from its
 * statistics. Targets (issue 31): at 16 streams the tokens per second are at least 4x one stream's,
 * and the next-token model's mean batch is at least 4. Each concurrency measured twice (A B B A)
 * against drift, after a warm-up.
 */
export async function runStreaming(options: {
  concurrencies: readonly number[];
  tokens: number;
  durationMs: number;
  log: (line: string) => void;
  name?: string;
}): Promise<StreamingResult> {
  const { log, tokens, durationMs } = options;
  const repo = await mkdtemp(join(tmpdir(), 'batchwise-bench-streaming-'));
  for (const model of MODELS) await cp(join(EXAMPLE_REPOSITORY, model), join(repo, model), { recursive: true });
  const server = await startServerProcess(['--model-repository', repo, '--shutdown-grace-secs', '0']);
  const measured: StreamingPoint[] = [];
  try {
    const low = Math.min(...options.concurrencies);
    const high = Math.max(...options.concurrencies);
    await drive(server, high, tokens, Math.min(durationMs, 1000)); // warm-up
    for (const concurrency of [low, high, high, low]) {
      const point = await drive(server, concurrency, tokens, durationMs);
      log(
        `c=${concurrency}: ${point.tokensPerSecond.toFixed(0)} tokens/s, first token p50 ${point.firstTokenMs.p50.toFixed(1)} ms, ` +
          `between tokens p99 ${point.betweenTokensMs.p99.toFixed(2)} ms, next_token mean batch ${point.nextToken.avgBatchSize.toFixed(2)}`,
      );
      measured.push(point);
    }
  } finally {
    await server.stop();
    await rm(repo, { recursive: true, force: true });
  }
  const at = (c: number) => measured.filter((p) => p.concurrency === c);
  const mean = (points: readonly StreamingPoint[], of: (p: StreamingPoint) => number) =>
    points.reduce((s, p) => s + of(p), 0) / points.length;
  const low = at(Math.min(...options.concurrencies));
  const high = at(Math.max(...options.concurrencies));
  const ratio = mean(high, (p) => p.tokensPerSecond) / mean(low, (p) => p.tokensPerSecond);
  const batch = mean(high, (p) => p.nextToken.avgBatchSize);
  const checks = [
    ratioCheck(`tokens/s at ${high[0]!.concurrency} streams over 1`, ratio, { atLeast: 4 }),
    ratioCheck(`next_token mean batch at ${high[0]!.concurrency} streams`, batch, { atLeast: 4 }),
  ];
  await reportScenario(
    {
      name: options.name ?? 'streaming',
      title: 'Streaming: text generation whose streams batch together (issue 31)',
      intro:
        `The text_generation example (a decoupled JavaScript model decoding greedily through the next_token ONNX model) ` +
        `over HTTP generate_stream, ${tokens} tokens per stream, clients opening streams one after another for ${durationMs} ms ` +
        'at each concurrency, measured twice (A B B A) after a warm-up, on the compiled server.',
      tables: [
        {
          headers: [
            'streams',
            'tokens/s',
            'first token p50 ms',
            'first token p99 ms',
            'between tokens p50 ms',
            'between tokens p99 ms',
            'next_token mean batch',
            'errors',
          ],
          rows: measured.map((p) => [
            p.concurrency,
            p.tokensPerSecond,
            p.firstTokenMs.p50,
            p.firstTokenMs.p99,
            p.betweenTokensMs.p50,
            p.betweenTokensMs.p99,
            p.nextToken.avgBatchSize,
            p.errors,
          ]),
        },
      ],
      checks,
      json: { environment: environment(), tokens, durationMs, points: measured, ratio, batch, checks },
    },
    log,
  );
  return { points: measured, ratio, pass: { throughput: checks[0]!.pass, batch: checks[1]!.pass } };
}

/** `concurrency` clients opening streams one after another until `durationMs` has passed (streams started before it finish). */
async function drive(server: ServerProcess, concurrency: number, tokens: number, durationMs: number): Promise<StreamingPoint> {
  const client = new HttpClient({ url: server.httpUrl, connections: concurrency });
  const firstToken: number[] = [];
  const between: number[] = [];
  let streams = 0;
  let received = 0;
  let errors = 0;
  let firstError: string | undefined;
  const before = await readStats(server.httpUrl, 'next_token');
  const start = performance.now();
  const deadline = start + durationMs;
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async (_, c) => {
        for (let i = 0; performance.now() < deadline; i++) {
          const sent = performance.now();
          let last = sent;
          let count = 0;
          try {
            for await (const _event of client.generateStream('text_generation', {
              text_input: PROMPTS[(c + i) % PROMPTS.length],
              max_tokens: tokens,
            })) {
              const now = performance.now();
              (count === 0 ? firstToken : between).push(now - last);
              last = now;
              count++;
            }
            if (count !== tokens) throw new Error(`a stream gave ${count} tokens, not ${tokens}`);
          } catch (error) {
            errors++;
            firstError ??= (error as Error).message;
          }
          streams++;
          received += count;
        }
      }),
    );
  } finally {
    await client.close();
  }
  const seconds = (performance.now() - start) / 1000;
  const after = await readStats(server.httpUrl, 'next_token');
  const quantiles = (ms: readonly number[]) => {
    const s = summarize(ms);
    return { p50: s.p50, p99: s.p99 };
  };
  return {
    concurrency,
    streams,
    tokens: received,
    errors,
    ...(firstError !== undefined && { firstError }),
    seconds,
    tokensPerSecond: received / seconds,
    firstTokenMs: quantiles(firstToken),
    betweenTokensMs: quantiles(between),
    nextToken: breakdown(before, after),
  };
}
