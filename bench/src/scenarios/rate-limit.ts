import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { HttpClient, type InferResult } from '@batchwise/client';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { environment, table, writeResult } from '../report.ts';
import { CACHE_DIR } from '../workload.ts';

/** Holds the instance for X milliseconds (a stand-in for a GPU run); START and END say when (ms, comparable across threads). */
const HOLDER = `
import { tensor } from '@batchwise/backend';
export default {
  async execute(requests) {
    const start = performance.timeOrigin + performance.now();
    await new Promise((resolve) => setTimeout(resolve, requests[0].inputs.X.data[0]));
    const end = performance.timeOrigin + performance.now();
    return requests.map(() => ({ outputs: [tensor('START', 'FP64', [1], [start]), tensor('END', 'FP64', [1], [end])] }));
  },
};
`;

/** The two models and their Triton priorities: priority 2 should get half the turns of priority 1. */
export const MODELS = [
  { name: 'high', priority: 1 },
  { name: 'low', priority: 2 },
] as const;

const config = (name: string, priority: number) => `name: "${name}"
backend: "js"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "START" data_type: TYPE_FP64 dims: [ 1 ] }, { name: "END" data_type: TYPE_FP64 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 rate_limiter { resources [ { name: "gpu" count: 1 } ] priority: ${priority} } } ]
`;

/** Share of executions of priority 1 against priority 2 under saturation: weights 1 and 1/2. */
export const EXPECTED_HIGH_SHARE = 2 / 3;
/** How far the measured share may be from the expected one. */
export const SHARE_TOLERANCE = 0.05;

export interface RateLimitResult {
  readonly executions: Record<string, number>;
  readonly throughput: Record<string, number>;
  readonly highShare: number;
  readonly maxConcurrent: number;
  readonly errors: number;
  readonly pass: { readonly share: boolean; readonly concurrency: boolean };
}

/** The most executions whose [start, end) intervals overlap at one instant. */
export function maxConcurrent(intervals: readonly { start: number; end: number }[]): number {
  const events = intervals.flatMap((i) => [
    { at: i.start, delta: 1 },
    { at: i.end, delta: -1 },
  ]);
  // At a tie an end comes first: one execution ending as the next starts is not an overlap.
  events.sort((a, b) => a.at - b.at || a.delta - b.delta);
  let now = 0;
  let most = 0;
  for (const e of events) most = Math.max(most, (now += e.delta));
  return most;
}

/**
 * Two models sharing one rate limiter resource of count 1 (`--rate-limit=execution_count
 * --rate-limit-resource=gpu:1`), priorities 1 and 2, each under `concurrency` closed-loop HTTP
 * clients for `durationMs`; each execution holds its instance `holdMs`. Reports each model's
 * share of the executions against the priorities' (2/3 for priority 1), and the most
 * executions seen running at once, from the start and end times the models report (at most 1).
 */
export async function runRateLimit(options: {
  concurrency: number;
  durationMs: number;
  holdMs: number;
  log: (line: string) => void;
  name?: string;
}): Promise<RateLimitResult> {
  const { log, concurrency, durationMs, holdMs } = options;
  const repo = join(CACHE_DIR, 'repos', 'rate-limit');
  await rm(repo, { recursive: true, force: true });
  for (const m of MODELS) {
    await mkdir(join(repo, m.name, '1'), { recursive: true });
    await writeFile(join(repo, m.name, 'config.pbtxt'), config(m.name, m.priority));
    await writeFile(join(repo, m.name, '1', 'model.mjs'), HOLDER);
  }
  const server = await startServerProcess(['--model-repository', repo, '--rate-limit=execution_count', '--rate-limit-resource=gpu:1']);
  const intervals: { model: string; start: number; end: number }[] = [];
  let errors = 0;
  let firstError: string | undefined;
  const clients = Array.from({ length: concurrency }, () => new HttpClient({ url: server.httpUrl }));
  try {
    const deadline = performance.now() + durationMs;
    const loop = async (client: HttpClient, model: string) => {
      while (performance.now() < deadline) {
        try {
          const result: InferResult = await client.infer({
            model,
            inputs: [{ name: 'X', datatype: 'FP32', shape: [1], data: Float32Array.of(holdMs) }],
          });
          const value = (name: string) => (result.outputs.find((o) => o.name === name)!.data as Float64Array)[0]!;
          intervals.push({ model, start: value('START'), end: value('END') });
        } catch (error) {
          errors++;
          firstError ??= (error as Error).message;
        }
      }
    };
    await Promise.all(MODELS.flatMap((m) => clients.map((client) => loop(client, m.name))));
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await server.stop();
  }
  // Shares while both models were saturated: executions that began before the first client stopped.
  const lastCommonStart = Math.min(...MODELS.map((m) => Math.max(...intervals.filter((i) => i.model === m.name).map((i) => i.start))));
  const saturated = intervals.filter((i) => i.start <= lastCommonStart);
  const executions = Object.fromEntries(MODELS.map((m) => [m.name, saturated.filter((i) => i.model === m.name).length]));
  const span = (Math.max(...saturated.map((i) => i.end)) - Math.min(...saturated.map((i) => i.start))) / 1000;
  const throughput = Object.fromEntries(Object.entries(executions).map(([m, n]) => [m, n / span]));
  const highShare = executions['high']! / (executions['high']! + executions['low']!);
  const most = maxConcurrent(intervals);
  const pass = { share: Math.abs(highShare - EXPECTED_HIGH_SHARE) <= SHARE_TOLERANCE, concurrency: most <= 1 };
  log(
    `\n${table(
      ['model', 'priority', 'executions', 'infer/s', 'share', 'expected share'],
      MODELS.map((m) => [
        m.name,
        m.priority,
        executions[m.name]!,
        throughput[m.name]!.toFixed(1),
        (executions[m.name]! / saturated.length).toFixed(3),
        (m.priority === 1 ? EXPECTED_HIGH_SHARE : 1 - EXPECTED_HIGH_SHARE).toFixed(3),
      ]),
    )}\n`,
  );
  log(`errors: ${errors}${firstError ? ` (first: ${firstError})` : ''}`);
  log(
    `priority share: high ${highShare.toFixed(3)} (target ${EXPECTED_HIGH_SHARE.toFixed(3)} ± ${SHARE_TOLERANCE}) ${pass.share ? 'PASS' : 'MISS'}`,
  );
  log(`max concurrent executions: ${most} (resource count 1) ${pass.concurrency ? 'PASS' : 'MISS'}`);
  const result: RateLimitResult = { executions, throughput, highShare, maxConcurrent: most, errors, pass };
  await writeResult(options.name ?? 'rate-limit', { concurrency, durationMs, holdMs, environment: environment(), ...result });
  return result;
}
