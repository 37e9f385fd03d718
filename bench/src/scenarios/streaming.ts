import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { summarize } from '@batchwise/client/load';
import { startServerProcess, type ServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { LeanSseClient } from '../lean-sse.ts';
import { environment, ratioCheck, reportScenario } from '../report.ts';
import { breakdown, readStats, type ServerBreakdown } from '../server-stats.ts';
import { EXAMPLE_REPOSITORY } from './ensemble.ts';

/** The load: 1 and 16 concurrent streams of 64 tokens each. */
export const STREAMING = { concurrencies: [1, 16], tokens: 64 } as const;

/**
 * The models served: the example's text generation in its two forms, each calling next_token per token:
 * `ensemble`, Triton's shape (text_tokenizer -> the decoupled token_generator -> text_detokenizer), and
 * `single`, one decoupled JavaScript model doing it all (the baseline of the ensemble's cost).
 */
const MODELS = [
  'next_token',
  'text_tokenizer',
  'token_generator',
  'text_detokenizer',
  'text_generation',
  'text_generation_single',
] as const;
const FORMS = { single: 'text_generation_single', ensemble: 'text_generation' } as const;
export type StreamingForm = keyof typeof FORMS;
const PROMPTS = ['the ', 'when a client', 'a batch of', 'streams share', 'the server', 'a model that', 'each token', 'requests'];

export interface StreamingPoint {
  readonly form: StreamingForm;
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
  /** The ensemble's detokenizer step over the measurement (the ensemble form only). */
  readonly detokenizer?: ServerBreakdown;
}

export interface StreamingResult {
  readonly points: StreamingPoint[];
  /** The single model's tokens/s at the highest concurrency over the lowest's. */
  readonly ratio: number;
  /** The ensemble's tokens/s over the single model's, at the highest concurrency. */
  readonly ensembleRatio: number;
  readonly pass: { readonly throughput: boolean; readonly batch: boolean; readonly ensemble: boolean };
}

/**
 * `pnpm bench streaming`: the text_generation example (examples/model_repository) in both forms
 * (FORMS) served by the compiled server; `concurrency` clients each open generate_stream requests of
 * `tokens` tokens one after another over HTTP (Server-Sent Events) for `durationMs`; tokens per second
 * in all, time to first token p50/p99, time between tokens p50/p99, the next-token model's mean batch
 * and the ensemble's detokenizer's, from their statistics. Targets: at 16 streams the single model's
 * tokens per second are at least 4x one stream's and next_token's mean batch at least 4 (issue 31);
 * the ensemble's tokens per second at 16 streams are at least 0.8 of the single model's (issue 36).
 * Each form and concurrency measured twice, in the order A B B A, against drift, after a warm-up.
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
    for (const form of ['single', 'ensemble'] as const) await drive(server, form, high, tokens, Math.min(durationMs, 1000)); // warm-up
    const order: [StreamingForm, number][] = [
      ['single', low],
      ['ensemble', low],
      ['single', high],
      ['ensemble', high],
    ];
    for (const [form, concurrency] of [...order, ...[...order].reverse()]) {
      const point = await drive(server, form, concurrency, tokens, durationMs);
      log(
        `${form} c=${concurrency}: ${point.tokensPerSecond.toFixed(0)} tokens/s, first token p50 ${point.firstTokenMs.p50.toFixed(1)} ms, ` +
          `between tokens p99 ${point.betweenTokensMs.p99.toFixed(2)} ms, next_token mean batch ${point.nextToken.avgBatchSize.toFixed(2)}` +
          (point.detokenizer ? `, detokenizer mean batch ${point.detokenizer.avgBatchSize.toFixed(2)}` : ''),
      );
      measured.push(point);
    }
  } finally {
    await server.stop();
    await rm(repo, { recursive: true, force: true });
  }
  const at = (form: StreamingForm, c: number) => measured.filter((p) => p.form === form && p.concurrency === c);
  const mean = (points: readonly StreamingPoint[], of: (p: StreamingPoint) => number) =>
    points.reduce((s, p) => s + of(p), 0) / points.length;
  const [lowC, highC] = [Math.min(...options.concurrencies), Math.max(...options.concurrencies)];
  const tokensPerSecond = (form: StreamingForm, c: number) => mean(at(form, c), (p) => p.tokensPerSecond);
  const ratio = tokensPerSecond('single', highC) / tokensPerSecond('single', lowC);
  const batch = mean(at('single', highC), (p) => p.nextToken.avgBatchSize);
  const ensembleRatio = tokensPerSecond('ensemble', highC) / tokensPerSecond('single', highC);
  const tokens0 = (form: StreamingForm, c: number) => tokensPerSecond(form, c).toFixed(0);
  const checks = [
    ratioCheck(`single model: tokens/s at ${highC} streams over ${lowC}`, ratio, { atLeast: 4 }),
    ratioCheck(`single model: next_token mean batch at ${highC} streams`, batch, { atLeast: 4 }),
    ratioCheck(
      `ensemble: tokens/s at ${highC} streams over the single model's`,
      ensembleRatio,
      { atLeast: 0.8 },
      `${tokens0('ensemble', highC)} vs ${tokens0('single', highC)}`,
    ),
  ];
  const costRows = [lowC, highC].map((c) => [
    c,
    tokensPerSecond('single', c),
    tokensPerSecond('ensemble', c),
    tokensPerSecond('ensemble', c) / tokensPerSecond('single', c),
    mean(at('ensemble', c), (p) => p.detokenizer!.avgBatchSize),
  ]);
  await reportScenario(
    {
      name: options.name ?? 'streaming',
      title: 'Streaming: text generation whose streams batch together, as one model and as an ensemble (issues 31, 36)',
      intro:
        'The text_generation example over HTTP generate_stream in two forms, each decoding greedily through the next_token ONNX ' +
        "model: `single`, one decoupled JavaScript model (text_generation_single), and `ensemble`, Triton's shape " +
        '(text_generation: text_tokenizer -> the decoupled token_generator -> text_detokenizer). ' +
        `${tokens} tokens per stream, clients opening streams one after another for ${durationMs} ms at each form and concurrency, ` +
        'measured twice (A B B A) after a warm-up, on the compiled server.',
      tables: [
        {
          headers: ['streams', 'single tokens/s', 'ensemble tokens/s', 'ensemble / single', 'detokenizer mean batch'],
          rows: costRows,
        },
        {
          headers: [
            'form',
            'streams',
            'tokens/s',
            'first token p50 ms',
            'first token p99 ms',
            'between tokens p50 ms',
            'between tokens p99 ms',
            'next_token mean batch',
            'detokenizer mean batch',
            'errors',
          ],
          rows: measured.map((p) => [
            p.form,
            p.concurrency,
            p.tokensPerSecond,
            p.firstTokenMs.p50,
            p.firstTokenMs.p99,
            p.betweenTokensMs.p50,
            p.betweenTokensMs.p99,
            p.nextToken.avgBatchSize,
            p.detokenizer?.avgBatchSize ?? '',
            p.errors,
          ]),
        },
      ],
      checks,
      json: { environment: environment(), tokens, durationMs, points: measured, ratio, batch, ensembleRatio, checks },
    },
    log,
  );
  return {
    points: measured,
    ratio,
    ensembleRatio,
    pass: { throughput: checks[0]!.pass, batch: checks[1]!.pass, ensemble: checks[2]!.pass },
  };
}

/** `concurrency` clients opening streams of `form` one after another until `durationMs` has passed (streams started before it finish). */
async function drive(
  server: ServerProcess,
  form: StreamingForm,
  concurrency: number,
  tokens: number,
  durationMs: number,
): Promise<StreamingPoint> {
  const { hostname, port } = new URL(server.httpUrl);
  const client = new LeanSseClient(Number(port), hostname);
  const path = `/v2/models/${FORMS[form]}/generate_stream`;
  const firstToken: number[] = [];
  const between: number[] = [];
  let streams = 0;
  let received = 0;
  let errors = 0;
  let firstError: string | undefined;
  const before = await readStats(server.httpUrl, 'next_token');
  const detokenizerBefore = form === 'ensemble' ? await readStats(server.httpUrl, 'text_detokenizer') : undefined;
  const start = performance.now();
  const deadline = start + durationMs;
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async (_, c) => {
        for (let i = 0; performance.now() < deadline; i++) {
          let last = performance.now();
          let count = 0;
          try {
            const body = JSON.stringify({ text_input: PROMPTS[(c + i) % PROMPTS.length], max_tokens: tokens });
            await client.stream(path, body, () => {
              const now = performance.now();
              (count === 0 ? firstToken : between).push(now - last);
              last = now;
              count++;
            });
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
    client.close();
  }
  const seconds = (performance.now() - start) / 1000;
  const after = await readStats(server.httpUrl, 'next_token');
  const detokenizer = detokenizerBefore && breakdown(detokenizerBefore, await readStats(server.httpUrl, 'text_detokenizer'));
  const quantiles = (ms: readonly number[]) => {
    const s = summarize(ms);
    return { p50: s.p50, p99: s.p99 };
  };
  return {
    form,
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
    ...(detokenizer && { detokenizer }),
  };
}
