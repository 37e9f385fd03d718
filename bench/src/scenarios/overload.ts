import { HttpClient, BatchwiseClientError } from '@batchwise/client';
import { mlp } from '@batchwise/modelgen';
import { measure, sleep, type WindowOptions } from '../load-generator.ts';
import { table, writeResult } from '../report.ts';
import { scrapeMetric, startServerProcess } from '../server-process.ts';
import { summarize } from '../stats.ts';
import { benchRepository, cachedModel, inferRequest } from '../workload.ts';
import { THREADS, type BatchingModel } from './batching.ts';

const CONFIG = (width: number) => `name: "mlp"
max_batch_size: 64
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ ${width} ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ ${width} ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
dynamic_batching { max_queue_delay_microseconds: 1000 default_queue_policy { max_queue_size: 64 } }
parameters { key: "intra_op_thread_count" value: { string_value: "${THREADS}" } }`;

/**
 * Issue 6's overload proof: measure the saturated rate, then offer four times that rate
 * (open loop) for `durationMs`, while watching readiness and resident memory. Admitted
 * requests must all succeed; the rest must be refused with 503, quickly.
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
  const server = await startServerProcess(['--model-repository', repo, '--memory-limit', options.memoryLimit]);
  try {
    const saturation = inferRequest(server, 'http-binary', 'mlp', model.width, 32);
    const saturated = await measure('saturation c=32', saturation.send, { concurrency: 32 }, { ...options.windows, log });
    await saturation.close();
    const rate = Math.max(10, Math.round(saturated.throughput * 4));
    log(`saturated at ${saturated.throughput.toFixed(0)} infer/s; offering ${rate} requests/s for ${options.durationMs / 1000} s`);

    const client = new HttpClient({ url: server.httpUrl, connections: 512 });
    const data = new Float32Array(model.width).fill(0.5);
    const ok: number[] = [];
    const rejected: number[] = [];
    const failed: string[] = [];
    let notReady = 0;
    let peakRss = 0;
    let running = true;
    const watcher = (async () => {
      while (running) {
        peakRss = Math.max(peakRss, (await scrapeMetric(server.metricsUrl, 'nv_cpu_memory_used_bytes')) ?? 0);
        if ((await fetch(`${server.httpUrl}/v2/health/ready`)).status !== 200) notReady++;
        await sleep(250);
      }
    })();
    const inFlight = new Set<Promise<void>>();
    // The generator itself must not queue without bound: past this many outstanding requests a
    // due request is counted as not sent (the server never saw it) rather than queued client-side.
    const maxOutstanding = 512;
    let notSent = 0;
    const begin = performance.now();
    let next = begin;
    while (performance.now() - begin < options.durationMs) {
      next += 1000 / rate;
      if (inFlight.size >= maxOutstanding) {
        notSent++;
        const wait = next - performance.now();
        if (wait > 0) await sleep(wait);
        continue;
      }
      const started = performance.now();
      const p = client
        .infer({ model: 'mlp', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, model.width], data }] })
        .then(
          () => void ok.push(performance.now() - started),
          (error: unknown) => {
            if (error instanceof BatchwiseClientError && error.httpStatus === 503) rejected.push(performance.now() - started);
            else failed.push((error as Error).message);
          },
        )
        .finally(() => inFlight.delete(p));
      inFlight.add(p);
      const wait = next - performance.now();
      if (wait > 0) await sleep(wait);
    }
    await Promise.all(inFlight);
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
      failedOther: failed.length,
      notSentByGenerator: notSent,
      firstFailure: failed[0],
      okLatencyMs: summarize(ok),
      rejectedLatencyMs: summarize(rejected),
      notReadySamples: notReady,
      peakRssBytes: peakRss,
      memoryBudgetBytes: budget,
    };
    log(`\n${table(['outcome', 'count', 'p50 ms', 'p99 ms'], [
      ['succeeded', ok.length, result.okLatencyMs.p50, result.okLatencyMs.p99],
      ['rejected 503', rejected.length, result.rejectedLatencyMs.p50, result.rejectedLatencyMs.p99],
      ['failed otherwise', failed.length, '', ''],
      ['not sent (generator at 512 outstanding)', notSent, '', ''],
    ])}`);
    log(`peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB of a ${(budget / 2 ** 20).toFixed(0)} MiB budget; not ready in ${notReady} samples`);
    await writeResult('overload', result);
    return result;
  } finally {
    await server.stop();
  }
}
