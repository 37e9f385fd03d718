/**
 * The KIND_CPU side of the GPU check's comparison, configured as `batchwise tune` configures it: the
 * server's own `tune` command, run from the pack against the check's repository, at the
 * comparison's concurrency, with no GPU visible to it (CUDA_VISIBLE_DEVICES empty: the search stays
 * on the CPU's instances, threads, queue delay and batch sizes). Its recommended config.pbtxt (the
 * nearest when none met the objective) is what the check then serves.
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface TunedConfig {
  /** The config.pbtxt tune recommends, or undefined when it wrote none. */
  readonly configText?: string;
  /** tune's verdict line (`recommended: ...` or `nearest: ...`) and its exit status. */
  readonly verdict: string;
  readonly status: number | null;
  /** What tune printed (its progress lines and results). */
  readonly output: string;
  readonly reportMarkdown?: string;
}

export interface TuneStepOptions {
  /** The server's CLI script (app/server/main.js in the pack). */
  readonly serverMain: string;
  readonly repository: string;
  readonly model: string;
  readonly outDir: string;
  readonly concurrency: number;
  /** p99 to stay within: generous, the comparison is about throughput. */
  readonly latencyObjective: string;
  readonly budget: string;
  readonly windowMs: number;
  readonly maxWindows: number;
  readonly maxCandidates?: number;
  readonly timeoutMs: number;
  readonly cwd: string;
}

/** The `tune` command line the step runs (after `node`). */
export function tuneArgs(o: TuneStepOptions): string[] {
  return [
    o.serverMain,
    'tune',
    '--model-repository',
    o.repository,
    '--model',
    o.model,
    '--latency-objective',
    o.latencyObjective,
    '--budget',
    o.budget,
    '--concurrency',
    String(o.concurrency),
    '--window-ms',
    String(o.windowMs),
    '--max-windows',
    String(o.maxWindows),
    ...(o.maxCandidates ? ['--max-candidates', String(o.maxCandidates)] : []),
    '--out',
    o.outDir,
  ];
}

export function runTune(o: TuneStepOptions): Promise<TunedConfig> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--conditions=batchwise-dist', ...tuneArgs(o)], {
      cwd: o.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, CUDA_VISIBLE_DEVICES: '', CI: '1' },
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => child.kill('SIGTERM'), o.timeoutMs);
    child.on('exit', (status) => {
      clearTimeout(timer);
      void (async () => {
        const read = (file: string) => readFile(join(o.outDir, file), 'utf8').catch(() => undefined);
        const configText = await read('recommended.config.pbtxt');
        const reportMarkdown = await read('report.md');
        const verdict = output.split('\n').find((l) => /^(recommended|nearest): /.test(l)) ?? `tune exited (${status}) without a verdict`;
        resolve({
          ...(configText !== undefined && { configText }),
          ...(reportMarkdown !== undefined && { reportMarkdown }),
          verdict,
          status,
          output,
        });
      })();
    });
  });
}
