import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { identity } from '@batchwise/modelgen';
import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { encodeHttpInferRequest } from '@batchwise/client';
import { fp32InferRequest, leanFp32Client } from '../lean-http.ts';
import { measureLean } from '../lean-measure.ts';
import { environment, table, writeResult } from '../report.ts';
import { benchRepository, cachedModel, CACHE_DIR, fp32Config } from '../workload.ts';
import { startEcho } from './overhead.ts';
import { programInstalled } from '../h2load.ts';

const WIDTH = 16;
const MODEL = 'tiny';
const run = promisify(execFile);

export interface WrkCheckRow {
  readonly target: 'echo' | 'batchwise';
  readonly connections: number;
  readonly leanPerSecond: number;
  readonly wrkPerSecond: number;
  /** Cores' worth of CPU of each client while it ran. */
  readonly leanClientCores: number;
  readonly wrkClientCores: number;
  /** Cores' worth of CPU of everything else while the lean client ran. */
  readonly otherCores?: number;
}

/**
 * The lean client (bench/src/lean-http.ts) against wrk on the same request bytes: the fastify
 * echo and the 16-float ONNX identity, at each number of connections, wrk with one thread (the
 * lean client is one thread too). Requests/s of each, and each client's own CPU (wrk's from bash's
 * `times` for its children). Skipped, saying so, where wrk is not installed.
 */
export async function runWrkCheck(options: {
  concurrencies: readonly number[];
  durationMs: number;
  log: (line: string) => void;
  name?: string;
}): Promise<WrkCheckRow[]> {
  const { log, durationMs } = options;
  if (!(await wrkInstalled())) {
    log('wrk is not installed: nothing to compare with');
    return [];
  }
  const file = await cachedModel('identity-fp32-16', () => identity('FP32', [WIDTH]), log);
  const repo = await benchRepository('wrk-check', [
    { name: MODEL, modelFile: file, config: fp32Config(MODEL, { width: WIDTH, maxBatchSize: 64, batching: true, delayUs: 0 }) },
  ]);
  const script = await wrkScript(MODEL, WIDTH);
  const rows: WrkCheckRow[] = [];
  const echo = await startEcho();
  const server = await startServerProcess(['--model-repository', repo]).catch((error: unknown) => {
    echo.stop();
    throw error;
  });
  try {
    for (const [target, url, pid] of [
      ['echo', echo.url, echo.pid],
      ['batchwise', server.httpUrl, server.child.pid!],
    ] as const) {
      for (const connections of options.concurrencies) {
        const client = leanFp32Client(url, MODEL, WIDTH);
        const windows = { warmupMs: 1000, windowMs: durationMs, minWindows: 1, maxWindows: 1, tolerance: 1 };
        const lean = await measureLean(`lean ${target} c=${connections}`, client, { concurrency: connections }, windows, { pid }).finally(
          () => client.close(),
        );
        // bash's `times` prints its children's user and system time last: wrk's own CPU.
        const { stdout } = await run('bash', [
          '-c',
          'wrk "$@" && times',
          'wrk',
          '-t1',
          `-c${connections}`,
          `-d${Math.max(1, Math.round(durationMs / 1000))}s`,
          '-s',
          script,
          `${url}/v2/models/${MODEL}/infer`,
        ]);
        const perSecond = Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1]);
        const times = [...stdout.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]));
        const wrkCpuSeconds = (times.at(-2) ?? NaN) + (times.at(-1) ?? NaN);
        const row: WrkCheckRow = {
          target,
          connections,
          leanPerSecond: lean.client.throughput,
          wrkPerSecond: perSecond,
          leanClientCores: lean.clientCores,
          wrkClientCores: wrkCpuSeconds / Math.max(1, Math.round(durationMs / 1000)),
          ...(lean.otherCores !== undefined && { otherCores: lean.otherCores }),
        };
        log(`  ${target} c=${connections}: lean ${row.leanPerSecond.toFixed(0)}/s, wrk ${row.wrkPerSecond.toFixed(0)}/s`);
        rows.push(row);
      }
    }
  } finally {
    echo.stop();
    await server.stop();
  }
  log(
    `\n${table(
      ['target', 'connections', 'lean req/s', 'wrk req/s', 'lean/wrk', 'lean client cpu', 'wrk client cpu', 'other cpu'],
      rows.map((r) => [
        r.target,
        r.connections,
        r.leanPerSecond,
        r.wrkPerSecond,
        r.leanPerSecond / r.wrkPerSecond,
        r.leanClientCores,
        r.wrkClientCores,
        r.otherCores ?? '',
      ]),
    )}\n`,
  );
  await writeResult(options.name ?? 'wrk-check', { environment: environment(), durationMs, rows });
  return rows;
}

/** Whether wrk is on the PATH. */
export const wrkInstalled = (): Promise<boolean> => programInstalled('wrk');

/** A wrk script that POSTs the lean client's request to `model` (fp32InferRequest of `width` floats): the same headers and body. */
export async function wrkScript(model: string, width: number): Promise<string> {
  const dir = join(CACHE_DIR, 'wrk');
  await mkdir(dir, { recursive: true });
  const { headers, body } = encodeHttpInferRequest(fp32InferRequest(model, width));
  const bodyFile = join(dir, `${model}-${width}.bin`);
  await writeFile(bodyFile, body);
  const script = join(dir, `${model}-${width}.lua`);
  await writeFile(
    script,
    [
      'wrk.method = "POST"',
      `local f = io.open("${bodyFile}", "rb")`,
      'wrk.body = f:read("*a")',
      'f:close()',
      ...Object.entries(headers).map(([k, v]) => `wrk.headers["${k}"] = "${v}"`),
      '',
    ].join('\n'),
  );
  return script;
}

export interface WrkLatency {
  readonly perSecond: number;
  /** Requests completed: wrk runs whole seconds, at least one. */
  readonly requests: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Answers other than 2xx/3xx, and socket errors. */
  readonly errors: number;
}

/** wrk (one thread, `connections` connections, `--latency`) POSTing `script`'s request to `model` at `url` for `seconds`: its rate and latency percentiles. */
export async function wrkLatency(url: string, model: string, script: string, connections: number, seconds: number): Promise<WrkLatency> {
  const { stdout } = await run('wrk', [
    '-t1',
    `-c${connections}`,
    `-d${Math.max(1, Math.round(seconds))}s`,
    '--latency',
    '-s',
    script,
    `${url}/v2/models/${model}/infer`,
  ]);
  // "     50%  123.00us" in the latency distribution.
  const percentile = (p: number): number => {
    const m = new RegExp(`^\\s*${p}(?:\\.0+)?%\\s+([\\d.]+)(us|ms|s)\\s*$`, 'm').exec(stdout);
    return m ? Number(m[1]) * ({ us: 0.001, ms: 1, s: 1000 } as const)[m[2] as 'us' | 'ms' | 's'] : NaN;
  };
  const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout);
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0);
  return {
    perSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1]),
    requests: Number(/(\d+) requests in /.exec(stdout)?.[1]),
    p50Ms: percentile(50),
    p99Ms: percentile(99),
    errors: non2xx + (socketErrors ? socketErrors.slice(1).reduce((a, b) => a + Number(b), 0) : 0),
  };
}
