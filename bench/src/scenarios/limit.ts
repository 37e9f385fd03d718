import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { mlp } from '@batchwise/modelgen';
import { type CpuShare } from '../cpu-usage.ts';
import { latencyVsInProcess, openInProcess, REFERENCE_RATIOS, samplesPerSecond, throughputVsLimit } from '../in-process.ts';
import { environment, RESULTS_DIR, table, writeResult } from '../report.ts';
import { cachedModel } from '../workload.ts';
import { batchingConfig, THREADS, type BatchingModel, type BatchingResult } from './batching.ts';

export interface LimitRow {
  readonly batchSize: number;
  readonly runMs: number;
  readonly samplesPerSecond: number;
  readonly cpu?: CpuShare;
}

/**
 * The same model in-process through ONNX Runtime with the same threads: the physical limit
 * the server is measured against, as a table over the batch sizes the server formed.
 *
 * The ratios to quote come from the batching run, which measures its own in-process reference
 * side by side with the server (PairedPoint in batching.ts). This scenario runs minutes later,
 * and this machine's speed drifts by up to 1.5x within minutes, so it compares the server with
 * its table only when the batching result has no paired ratios (a run from before they existed,
 * or one without a closed-loop sweep), and says that those are unpaired.
 */
export async function runLimit(options: {
  model: BatchingModel;
  batchSizes?: readonly number[];
  durationMs: number;
  log: (line: string) => void;
  /** Result file name. @default 'limit' */
  name?: string;
  /** The batching run to compare with (bench/results/<name>.json). @default 'batching' */
  batchingName?: string;
}): Promise<{ rows: LimitRow[]; comparison: Record<string, number>; paired: boolean }> {
  const { model, log } = options;
  const env = environment();
  const file = await cachedModel(`mlp-${model.layers}x${model.width}`, () => mlp({ layers: model.layers, width: model.width }), log);
  const batchingFile = join(RESULTS_DIR, `${options.batchingName ?? 'batching'}.json`);
  const label = `mlp-${model.layers}x${model.width}`;
  const batching = await readFile(batchingFile, 'utf8').then(
    (t) => JSON.parse(t) as BatchingResult,
    () => undefined,
  );
  if (!batching) log(`no ${batchingFile}: measuring the default batch sizes, nothing to compare with (run the batching scenario first)`);
  else if (batching.model !== label)
    throw new Error(`${batchingFile} measured ${batching.model}, not ${label}: run the batching scenario with the same model`);
  else
    log(
      `comparing with ${batchingFile} (measured ${(batching as { environment?: { date?: string } }).environment?.date ?? 'at an unknown date'})`,
    );
  const formed = batching
    ? [...new Set(batching.points.flatMap((p) => Object.keys(p.server.batches).map(Number)))].sort((a, b) => a - b)
    : [];
  const sizes = options.batchSizes ?? (formed.length > 0 ? formed : [1, 2, 4, 8, 16, 32, 64]);
  const rows: LimitRow[] = [];
  const reference = await openInProcess({ file, width: model.width, config: batchingConfig('mlp_on', model, true) });
  try {
    for (const batchSize of sizes) {
      const w = await reference.window([batchSize], options.durationMs);
      const { runMs } = w.runs[0]!;
      rows.push({ batchSize, runMs, samplesPerSecond: samplesPerSecond(batchSize, runMs), ...(w.cpu && { cpu: w.cpu }) });
      log(`  in-process batch ${batchSize}: ${runMs.toFixed(2)} ms/run, ${samplesPerSecond(batchSize, runMs).toFixed(0)} samples/s`);
    }
  } finally {
    await reference.release();
  }
  log(
    `\n${table(
      ['batch', 'ms/run', 'samples/s', 'other cpu'],
      rows.map((r) => [r.batchSize, r.runMs, r.samplesPerSecond, r.cpu?.otherCores ?? '']),
    )}\n`,
  );

  const pairedRatios = Object.fromEntries(
    Object.entries(batching?.ratios ?? {}).filter(([k]) => REFERENCE_RATIOS.some((name) => k === name || k.startsWith(`${name}_`))),
  );
  const paired = Object.keys(pairedRatios).length > 0;
  let comparison: Record<string, number> = {};
  if (paired) {
    comparison = pairedRatios;
    log(
      `the ratios to quote, from ${batchingFile}, measured against an in-process reference side by side with the server (details: its 'paired'):`,
    );
  } else if (batching) {
    comparison = unpairedComparison(batching, rows);
    if (Object.keys(comparison).length > 0) {
      log(
        `unpaired: ${batchingFile} has no paired ratios, so this compares its server with the table above, measured minutes ` +
          'apart; this machine drifts by up to 1.5x in minutes, so re-run the batching scenario for ratios to quote',
      );
    }
  }
  for (const [k, v] of Object.entries(comparison)) log(`${k}: ${v.toFixed(3)}`);
  await writeResult(options.name ?? 'limit', {
    model: label,
    threads: THREADS,
    environment: env,
    rows,
    comparison,
    comparisonPaired: paired,
  });
  return { rows, comparison, paired };
}

/** The batching run's HTTP binary server (saturated point and c=1) against this run's table. */
function unpairedComparison(batching: BatchingResult, rows: readonly LimitRow[]): Record<string, number> {
  const runMs = new Map(rows.map((r) => [r.batchSize, r.runMs]));
  const on = batching.points.filter((p) => p.model === 'mlp_on' && p.protocol === 'http-binary');
  const saturated = on.reduce<(typeof on)[number] | undefined>(
    (a, b) => (!a || b.client.throughput > a.client.throughput ? b : a),
    undefined,
  );
  const c1 = on.find((p) => p.concurrency === 1 && p.rate === undefined);
  const batch1 = runMs.get(1);
  return {
    ...(saturated && throughputVsLimit({ throughput: saturated.client.throughput, ...saturated.server }, runMs)),
    ...(c1 && batch1 !== undefined && latencyVsInProcess(c1.client.latencyMs.p50, batch1)),
  };
}
