import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { latencyThroughputSvg, type Series } from '@batchwise/client/load';
import { createTwoFilesPatch } from 'diff';
import { parseModelConfig } from '../../config/parse.ts';
import { printModelConfig } from '../../config/print.ts';
import { formatDurationMs } from '../duration.ts';
import { describeLevel, fixed1 as f1, fixed2 as f2, missedBy, serverP99 } from './explain.ts';
import type { LevelResult } from './run-candidate.ts';
import type { TuneResult } from './tune.ts';

/** The files a tune run writes into its output folder. */
export const REPORT_FILES = {
  json: 'report.json',
  markdown: 'report.md',
  plot: 'pareto.svg',
  /** A complete config.pbtxt: what `--apply` writes and `pnpm bench adaptive` reads. */
  config: 'recommended.config.pbtxt',
} as const;

/**
 * A unified diff of the recommended config.pbtxt against the current one ('' when they are the
 * same). Both sides in the canonical print (config/print.ts), so the diff shows what changes, not
 * how the current file happens to be laid out.
 */
export function configDiff(result: TuneResult): string {
  if (result.recommendedConfigText === undefined || result.recommendedConfigText === result.currentConfigText) return '';
  const canonical = (text: string) => printModelConfig(parseModelConfig(text));
  return createTwoFilesPatch(
    `${result.model}/config.pbtxt`,
    REPORT_FILES.config,
    canonical(result.currentConfigText),
    canonical(result.recommendedConfigText),
    'current, canonical layout',
    'recommended',
  );
}

/** The level the recommendation (or the nearest point) was measured at. */
export function recommendedLevel(result: TuneResult): LevelResult {
  const point = result.recommendation!.point;
  return result.runs.find((r) => r.id === point.candidate)!.levels.find((l) => l.concurrency === point.concurrency)!;
}

/** A level's row: the client's figures, then the server's and the CPU's ('-' where they could not be read). */
function levelRow(l: LevelResult, objectiveMs: number): string {
  const s = l.server && l.server.requests > 0 ? l.server : undefined;
  const server = s ? `${f2(s.avgRequestMs)} (${f2(s.avgQueueMs)}, ${f2(s.avgComputeInferMs)})` : '-';
  const cpu = l.cpu ? `${f2(l.cpu.generatorCores)} / ${f2(l.cpu.serverCores)} / ${f2(l.cpu.otherCores)}` : '-';
  return (
    `| ${l.concurrency} | ${f1(l.throughput)} | ${f2(l.p50Ms)} | ${f2(l.p90Ms)} | ${f2(l.p99Ms)} | ${l.p99Ms <= objectiveMs ? 'yes' : 'no'} | ${l.errors} ` +
    `| ${server} | ${serverP99(l)} | ${s ? f1(s.avgBatchSize) : '-'} | ${cpu} |`
  );
}

export function reportMarkdown(result: TuneResult): string {
  const lines = [
    `# batchwise tune: ${result.model}`,
    '',
    `Latency objective: p99 <= ${formatDurationMs(result.objectiveMs)}. Budget ${formatDurationMs(result.budgetMs)}, ` +
      `took ${formatDurationMs(Math.round(result.durationMs / 1000) * 1000)}. Host: ${result.host.cpuCores} CPU cores, ${result.host.gpuCount} GPUs. ` +
      `Closed loop at concurrency ${result.plan.concurrencies.join(', ')} over HTTP (binary tensors). Started ${result.startedAt}.`,
    '',
  ];
  const rec = result.recommendation;
  if (rec && result.miss) {
    lines.push(
      `**No configuration kept p99 within ${formatDurationMs(result.objectiveMs)}. Nearest: \`${rec.point.candidate}\`** at ${f1(rec.point.throughput)} infer/s, ` +
        `p99 ${f2(rec.point.p99Ms)} ms (concurrency ${rec.point.concurrency}), **${missedBy(result.miss)}** the objective: ${rec.reason}.`,
      '',
      `Why: ${result.miss.why}`,
      '',
      `At that point: ${describeLevel(recommendedLevel(result))}.`,
      '',
      '`recommended.config.pbtxt` holds this nearest config; `--apply` does not write it, and tune exits 1.',
    );
  } else if (rec) {
    lines.push(
      `**Recommended: \`${rec.point.candidate}\`** at ${f1(rec.point.throughput)} infer/s, p99 ${f2(rec.point.p99Ms)} ms (concurrency ${rec.point.concurrency}): ${rec.reason}.`,
      '',
      `At that point: ${describeLevel(recommendedLevel(result))}.`,
    );
    if (result.comparison) {
      const c = result.comparison;
      lines.push(
        '',
        `Against the current config: ${f1(c.current.throughput)} infer/s at p99 ${f2(c.current.p99Ms)} ms (c=${c.current.concurrency}) → ` +
          `${f1(c.recommended.throughput)} infer/s at p99 ${f2(c.recommended.p99Ms)} ms (c=${c.recommended.concurrency}): **${c.throughputRatio.toFixed(2)}x** the throughput at an equal or lower p99.`,
      );
    }
  } else {
    lines.push('**No configuration served the model**: every candidate failed; no recommendation.');
  }
  if (result.warnings.length > 0) lines.push('', ...result.warnings.map((w) => `**Warning**: ${w}`));
  if (result.skipped.length > 0)
    lines.push('', `Not measured (budget or --max-candidates): ${result.skipped.map((s) => `\`${s}\``).join(', ')}.`);
  lines.push(
    '',
    '## Configurations',
    '',
    "Each level: the client's figures (the load generator, on this host); in the server, from its statistics over the same windows, " +
      'the mean time per request (of which queue, compute), the bucket of its request-duration histogram that holds its p99 (5-10: above 5 ms, at most 10), and the mean batch; ' +
      'the CPU used meanwhile, in cores, by the load generator, the server and everything else on the host.',
    '',
  );
  for (const run of result.runs) {
    lines.push(`### \`${run.id}\` (${run.stage}): ${run.status}${run.error ? ` — ${run.error}` : ''}`, '');
    if (run.levels.length === 0) continue;
    lines.push(
      '| concurrency | infer/s | p50 ms | p90 ms | p99 ms | within objective | errors | server ms per request (queue, compute) | server p99 ms (histogram bucket) | mean batch | CPU cores: generator / server / other |',
      '|---:|---:|---:|---:|---:|:---:|---:|---:|---:|---:|---:|',
    );
    for (const l of run.levels) lines.push(levelRow(l, result.objectiveMs));
    lines.push('');
  }
  lines.push('## Pareto front (throughput against p99)', '', '| candidate | concurrency | infer/s | p99 ms |', '|---|---:|---:|---:|');
  for (const p of result.front) lines.push(`| \`${p.candidate}\` | ${p.concurrency} | ${f1(p.throughput)} | ${f2(p.p99Ms)} |`);
  const diff = configDiff(result);
  if (diff) lines.push('', '## Recommended config.pbtxt against the current one', '', '```diff', diff.trimEnd(), '```');
  return `${lines.join('\n')}\n`;
}

export function reportSvg(result: TuneResult): string {
  const series: Series[] = result.runs
    .filter((r) => r.levels.length > 0)
    .map((r) => ({
      name: r.id,
      points: r.levels.map((l) => ({ x: l.throughput, y: l.p99Ms, label: `c=${l.concurrency}` })),
      dashed: r.status !== 'measured',
    }));
  const rec = result.recommendation?.point;
  // Beside the recommended (or nearest) config as the client saw it, the server's own p99: the gap
  // between the two is time outside the server (HTTP, the client, the generator's share of the CPU).
  const inServer = result.runs
    .find((r) => r.id === rec?.candidate)
    ?.levels.filter((l) => l.server?.p99BucketMs?.atMostMs !== undefined)
    .map((l) => ({ x: l.throughput, y: l.server!.p99BucketMs!.atMostMs!, label: `c=${l.concurrency}` }));
  if (inServer && inServer.length > 0)
    series.push({ name: `${rec!.candidate} in the server (p99 at most)`, points: inServer, dashed: true });
  return latencyThroughputSvg(`batchwise tune: ${result.model}`, series, 'p99 latency (ms)', {
    limit: { y: result.objectiveMs, label: `objective ${formatDurationMs(result.objectiveMs)}` },
    ...(rec && {
      marker: { x: rec.throughput, y: rec.p99Ms, label: result.miss ? `nearest: ${missedBy(result.miss)}` : 'recommended' },
    }),
  });
}

/** Writes report.json, report.md, pareto.svg and (when there is one, the nearest included) recommended.config.pbtxt into `outDir`. */
export async function writeReport(result: TuneResult, outDir: string): Promise<void> {
  await mkdir(outDir, { recursive: true });
  await writeFile(join(outDir, REPORT_FILES.json), `${JSON.stringify(result, null, 2)}\n`);
  await writeFile(join(outDir, REPORT_FILES.markdown), reportMarkdown(result));
  await writeFile(join(outDir, REPORT_FILES.plot), reportSvg(result));
  if (result.recommendedConfigText !== undefined) await writeFile(join(outDir, REPORT_FILES.config), result.recommendedConfigText);
}
