import { resolve } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { pino } from 'pino';
import { parsePositiveInteger } from '../flags.ts';
import { durationParser, formatDurationMs } from '../duration.ts';

// Only the command's flags load with the CLI: what runs the sweep (the load generator of
// @batchwise/client among it) is imported when `tune` runs, so `serve` never loads it.
export type { TuneOptions, TuneResult } from './tune.ts';

interface TuneFlags {
  modelRepository: string;
  model: string;
  latencyObjective: number;
  budget: number;
  apply?: boolean;
  out?: string;
  concurrency: number[];
  windowMs: number;
  maxWindows: number;
  maxCandidates?: number;
  logLevel: string;
}

function parseConcurrencies(value: string): number[] {
  const list = value.split(',').map((v) => Number(v.trim()));
  if (list.length === 0 || list.some((n) => !Number.isSafeInteger(n) || n < 1)) {
    throw new InvalidArgumentError(`expected rising positive integers separated by commas (e.g. 1,4,16), got '${value}'`);
  }
  return [...new Set(list)].sort((a, b) => a - b);
}

export interface TuneCommandIO {
  /** Results: the summary, the config diff, where the report is. @default process.stdout */
  readonly write?: (text: string) => void;
}

/** `batchwise tune`: sweeps configs of one model on this machine and recommends a config.pbtxt. */
export function tuneCommand(io: TuneCommandIO = {}): Command {
  const write = io.write ?? ((text: string) => void process.stdout.write(text));
  return new Command('tune')
    .description(
      'Find the config.pbtxt with the highest throughput whose p99 stays within a latency objective, by serving the model on this machine with candidate configs and measuring each',
    )
    .requiredOption(
      '--model-repository <location>',
      'repository: a local folder, s3://bucket/prefix, s3://host:port/bucket/prefix or s3://https://host:port/bucket/prefix',
    )
    .requiredOption('--model <name>', 'model name (its folder in the repository)')
    .requiredOption(
      '--latency-objective <duration>',
      'p99 latency to stay within, with a unit: 50ms, 0.2s',
      durationParser('--latency-objective'),
    )
    .addOption(
      new Option('--budget <duration>', 'total time for the sweep: 10m, 90s').argParser(durationParser('--budget')).default(600_000, '10m'),
    )
    .option('--apply', 'write the recommended config into the (local) repository; for S3, print the models promote command that ships it')
    .option(
      '--out <dir>',
      'folder for report.json, report.md, pareto.svg and recommended.config.pbtxt (default: tune-results/<model>-<time>)',
    )
    .addOption(
      new Option('--concurrency <list>', 'closed-loop concurrencies to measure each config at')
        .argParser(parseConcurrencies)
        .default([1, 2, 4, 8, 16, 32], '1,2,4,8,16,32'),
    )
    .option(
      '--window-ms <ms>',
      'measurement window (after a warm-up of the same length); more windows until throughput is stable',
      parsePositiveInteger,
      1500,
    )
    .option('--max-windows <n>', 'most windows per measurement', parsePositiveInteger, 3)
    .option('--max-candidates <n>', 'stop after this many configs, the current one included', parsePositiveInteger)
    .addOption(
      new Option('--log-level <level>', 'log level of the JSON logs on stderr').choices(['debug', 'info', 'warn', 'error']).default('warn'),
    )
    .action(async (flags: TuneFlags) => {
      const [
        { tune },
        { applyRecommendation },
        { createProgress },
        { configDiff, recommendedLevel, REPORT_FILES, writeReport },
        { describeLevel, missedBy },
      ] = await Promise.all([
        import('./tune.ts'),
        import('./apply.ts'),
        import('./progress.ts'),
        import('./report.ts'),
        import('./explain.ts'),
      ]);
      const logger = pino({ level: flags.logLevel, base: { service: 'batchwise', command: 'tune' } }, pino.destination(2));
      const outDir = resolve(flags.out ?? `tune-results/${flags.model}-${new Date().toISOString().replace(/[:.]/g, '-')}`);
      const result = await tune({
        repository: flags.modelRepository,
        model: flags.model,
        budgetMs: flags.budget,
        ...(flags.maxCandidates !== undefined && { maxCandidates: flags.maxCandidates }),
        plan: {
          concurrencies: flags.concurrency,
          objectiveMs: flags.latencyObjective,
          // Well above the window-to-window spread of throughput measured on a busy 2-core host (about 15%).
          dominanceMargin: 0.3,
          windows: {
            warmupMs: flags.windowMs,
            windowMs: flags.windowMs,
            minWindows: Math.min(2, flags.maxWindows),
            maxWindows: flags.maxWindows,
            tolerance: 0.1,
          },
        },
        logger,
        progress: createProgress(),
      });
      await writeReport(result, outDir);
      const report = resolve(outDir, REPORT_FILES.markdown);
      const rec = result.recommendation;
      if (!rec) throw new Error(`no configuration served '${result.model}': every candidate failed (report: ${report})`);
      const at = `${rec.point.throughput.toFixed(1)} infer/s at p99 ${rec.point.p99Ms.toFixed(2)} ms (concurrency ${rec.point.concurrency})`;
      const miss = result.miss;
      write(
        miss
          ? `nearest: ${rec.point.candidate} — ${at} misses the ${formatDurationMs(result.objectiveMs)} objective by ${missedBy(miss)}; ${rec.reason}\nwhy: ${miss.why}\n`
          : `recommended: ${rec.point.candidate} — ${at}; ${rec.reason}\n`,
      );
      write(`  at that point: ${describeLevel(recommendedLevel(result))}\n`);
      if (result.comparison) {
        const c = result.comparison;
        write(
          `${c.throughputRatio.toFixed(2)}x the current config's throughput at an equal or lower p99 (${c.current.throughput.toFixed(1)} → ${c.recommended.throughput.toFixed(1)} infer/s)\n`,
        );
      }
      for (const warning of result.warnings) write(`warning: ${warning}\n`);
      const diff = configDiff(result);
      write(diff ? `\n${diff}\n` : `the current config is already the ${miss ? 'nearest' : 'recommended'} one\n`);
      write(`report: ${report}\nconfig: ${resolve(outDir, REPORT_FILES.config)}\n`);
      if (miss) {
        // Scripts get a non-zero status: nothing was shown to meet the objective, so nothing is applied.
        throw new Error(
          `no configuration kept p99 within ${formatDurationMs(result.objectiveMs)}: the nearest, ${rec.point.candidate}, missed it by ${missedBy(miss)}` +
            `${flags.apply ? '; nothing applied' : ''} (report: ${report})`,
        );
      }
      if (flags.apply) write((await applyRecommendation(result, outDir)).text);
    });
}
