import { HttpClient, BatchwiseClientError } from '@batchwise/client';
import { mlp } from '@batchwise/modelgen';
import { measure, openLoopFor, sleep, summarize, type WindowOptions } from '@batchwise/client/load';
import { table, writeResult } from '../report.ts';
import { scrapeMetric, startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { benchRepository, cachedModel } from '../workload.ts';
import { THREADS, type BatchingModel } from './batching.ts';

const CONFIG = (width: number) => `name: "mlp"
max_batch_size: 64
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${width} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${width} ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
dynamic_batching { max_queue_delay_microseconds: 1000 }
parameters { key: "intra_op_thread_count" value: { string_value: "${THREADS}" } }`;

/** What the memory budget leaves to requests beyond the measured baseline. */
const REQUEST_ROOM_BYTES = 64 * 2 ** 20;
/** The load generator's cap on outstanding requests. */
const MAX_OUTSTANDING = 512;

/**
 * Issue 6's overload proof: measure the saturated rate, then offer four times that rate
 * (open loop) for `durationMs`, while watching readiness and resident memory. The queue is
 * unbounded (Triton's default), so what pushes back is the memory guard: the server is
 * restarted with a budget of its measured baseline plus REQUEST_ROOM_BYTES, and requests carry
 * enough rows for the backlog to hold twice that. Admitted requests must all succeed; the rest must be refused with
 * 503 naming the memory budget, quickly.
 */
export async function runOverload(options: {
  model: BatchingModel;
  durationMs: number;
  memoryLimit: string;
  windows: WindowOptions;
  log: (line: string) => void;
}) {
  const { model, log } = options;
  const file = await cachedModel(`mlp-${model.layers}x${model.width}`, () => mlp({ layers: model.layers, width: model.width }), log);
  const repo = await benchRepository('overload', [{ name: 'mlp', modelFile: file, config: CONFIG(model.width) }]);
  // Each request is charged about four times its input (body, batch copy, output, binary reply).
  const rows = Math.min(64, Math.ceil((2 * REQUEST_ROOM_BYTES) / MAX_OUTSTANDING / (model.width * 4 * 4)));
  const data = new Float32Array(rows * model.width).fill(0.5);
  const request = { model: 'mlp', inputs: [{ name: 'INPUT0', datatype: 'FP32' as const, shape: [rows, model.width], data }], binary: true };
  const probe = await startServerProcess(['--model-repository', repo, '--memory-limit', options.memoryLimit]);
  let saturated: Awaited<ReturnType<typeof measure>>;
  let memoryLimit: number;
  try {
    const saturation = new HttpClient({ url: probe.httpUrl, connections: 32 });
    const send = async () => void (await saturation.infer(request));
    saturated = await measure(`saturation c=32, ${rows} rows`, send, { concurrency: 32 }, { ...options.windows, log });
    await saturation.close();
    memoryLimit = ((await scrapeMetric(probe.metricsUrl, 'batchwise_memory_baseline_bytes')) ?? 0) + REQUEST_ROOM_BYTES;
  } finally {
    await probe.stop();
  }
  const server = await startServerProcess(['--model-repository', repo, '--memory-limit', String(memoryLimit)]);
  try {
    const rate = Math.max(10, Math.round(saturated.throughput * 4));
    log(
      `saturated at ${saturated.throughput.toFixed(0)} infer/s; offering ${rate} requests/s of ${rows} rows (4x) for ${options.durationMs / 1000} s ` +
        `with a memory budget of ${(memoryLimit / 2 ** 20).toFixed(0)} MiB (baseline + ${REQUEST_ROOM_BYTES / 2 ** 20} MiB)`,
    );

    const client = new HttpClient({ url: server.httpUrl, connections: 512 });
    const ok: number[] = [];
    const rejected: number[] = [];
    let overMemoryBudget = 0;
    let queueFull = 0;
    const failed: string[] = [];
    let notReady = 0;
    let peakRss = 0;
    let running = true;
    const watcher = (async () => {
      while (running) {
        peakRss = Math.max(peakRss, (await scrapeMetric(server.metricsUrl, 'batchwise_process_resident_memory_bytes')) ?? 0);
        if ((await fetch(`${server.httpUrl}/v2/health/ready`)).status !== 200) notReady++;
        await sleep(250);
      }
    })();
    const send = async () => {
      const started = performance.now();
      await client.infer(request).then(
        () => void ok.push(performance.now() - started),
        (error: unknown) => {
          if (error instanceof BatchwiseClientError && error.httpStatus === 503) {
            rejected.push(performance.now() - started);
            if (/memory budget/.test(error.message)) overMemoryBudget++;
            else if (/queue size/.test(error.message)) queueFull++;
          } else {
            failed.push((error as Error).message);
          }
        },
      );
    };
    const { notSent } = await openLoopFor(options.durationMs, () => rate, MAX_OUTSTANDING, send);
    running = false;
    await watcher;
    await client.close();
    const budget = (await scrapeMetric(server.metricsUrl, 'batchwise_memory_budget_bytes')) ?? 0;
    const result = {
      offeredPerSecond: rate,
      saturatedPerSecond: saturated.throughput,
      durationSeconds: options.durationMs / 1000,
      succeeded: ok.length,
      rejected503: rejected.length,
      rejectedOverMemoryBudget: overMemoryBudget,
      rejectedQueueFull: queueFull,
      admittedFailed: failed.length,
      notSentByGenerator: notSent,
      firstFailure: failed[0],
      okLatencyMs: summarize(ok),
      rejectedLatencyMs: summarize(rejected),
      notReadySamples: notReady,
      peakRssBytes: peakRss,
      memoryBudgetBytes: budget,
    };
    log(
      `\n${table(
        ['outcome', 'count', 'p50 ms', 'p99 ms'],
        [
          ['succeeded', ok.length, result.okLatencyMs.p50, result.okLatencyMs.p99],
          ['rejected 503', rejected.length, result.rejectedLatencyMs.p50, result.rejectedLatencyMs.p99],
          ['  of which over the memory budget', overMemoryBudget, '', ''],
          ['  of which queue full', queueFull, '', ''],
          ['admitted and failed (must be 0)', failed.length, '', ''],
          [`not sent (generator at ${MAX_OUTSTANDING} outstanding)`, notSent, '', ''],
        ],
      )}`,
    );
    log(
      `peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB of a ${(budget / 2 ** 20).toFixed(0)} MiB budget; not ready in ${notReady} samples`,
    );
    await writeResult('overload', result);
    return result;
  } finally {
    await server.stop();
  }
}
