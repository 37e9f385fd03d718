import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { latencyThroughputSvg, type Series } from '@batchwise/client/load';
import { createTwoFilesPatch } from 'diff';
import { parseModelConfig } from '../../config/parse.ts';
import { printModelConfig } from '../../config/print.ts';
import { formatDurationMs } from '../duration.ts';
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

const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : '-');
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '-');

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
  if (rec) {
    lines.push(
      `**Recommended: \`${rec.point.candidate}\`** at ${f1(rec.point.throughput)} infer/s, p99 ${f2(rec.point.p99Ms)} ms (concurrency ${rec.point.concurrency}): ${rec.reason}.`,
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
    lines.push(`**No configuration kept p99 within ${formatDurationMs(result.objectiveMs)}**: no recommendation.`);
  }
  if (result.skipped.length > 0)
    lines.push('', `Not measured (budget or --max-candidates): ${result.skipped.map((s) => `\`${s}\``).join(', ')}.`);
  lines.push('', '## Configurations', '');
  for (const run of result.runs) {
    lines.push(`### \`${run.id}\` (${run.stage}): ${run.status}${run.error ? ` — ${run.error}` : ''}`, '');
    if (run.levels.length === 0) continue;
    lines.push('| concurrency | infer/s | p50 ms | p90 ms | p99 ms | within objective | errors |', '|---:|---:|---:|---:|---:|:---:|---:|');
    for (const l of run.levels) {
      lines.push(
        `| ${l.concurrency} | ${f1(l.throughput)} | ${f2(l.p50Ms)} | ${f2(l.p90Ms)} | ${f2(l.p99Ms)} | ${l.p99Ms <= result.objectiveMs ? 'yes' : 'no'} | ${l.errors} |`,
      );
    }
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
  return latencyThroughputSvg(`batchwise tune: ${result.model}`, series, 'p99 latency (ms)', {
    limit: { y: result.objectiveMs, label: `objective ${formatDurationMs(result.objectiveMs)}` },
    ...(rec && { marker: { x: rec.throughput, y: rec.p99Ms, label: 'recommended' } }),
  });
}

/** Writes report.json, report.md, pareto.svg and (when there is one) recommended.config.pbtxt into `outDir`. */
export async function writeReport(result: TuneResult, outDir: string): Promise<void> {
  await mkdir(outDir, { recursive: true });
  await writeFile(join(outDir, REPORT_FILES.json), `${JSON.stringify(result, null, 2)}\n`);
  await writeFile(join(outDir, REPORT_FILES.markdown), reportMarkdown(result));
  await writeFile(join(outDir, REPORT_FILES.plot), reportSvg(result));
  if (result.recommendedConfigText !== undefined) await writeFile(join(outDir, REPORT_FILES.config), result.recommendedConfigText);
}
