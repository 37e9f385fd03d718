/**
 * h2load (Debian's nghttp2-client) as the gRPC and HTTP/1.1 load client (issue 44): a C client, so the measurement is the
 * server's and not a Node client's. It sends a pre-encoded, length-prefixed ModelInferRequest on
 * `connections` HTTP/2 connections with `streams` concurrent streams each, for a duration, and logs every
 * request (--log-file: start, HTTP status, microseconds), from which the percentiles are read. h2load does
 * not read gRPC trailers: a request counts as an error on a non-200 status or a failed stream only, so the
 * scenarios check their answers separately (a differential test covers what the server answers).
 */
import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { encodeHttpInferRequest } from '@batchwise/client';
import { fp32InferRequest } from './lean-http.ts';
import { encodeFp32InferRequest } from './raw-grpc.ts';
import { CACHE_DIR } from './workload.ts';

const run = promisify(execFile);

export const MODEL_INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';

export interface H2loadResult {
  readonly perSecond: number;
  readonly requests: number;
  /** Requests that did not answer 200 (a failed stream: status -1). */
  readonly errors: number;
  /** Answers by HTTP status, per second (-1: a failed stream); empty without the per-request log. */
  readonly statusPerSecond: Readonly<Record<number, number>>;
  /** Percentiles of the 200 answers only. */
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  /** h2load's mean time per request. */
  readonly meanMs: number;
  readonly seconds: number;
}

/**
 * Whether `program` is on the PATH: it ran with `--version`, whatever its exit status (`wrk --version` exits 1
 * after printing its version); only a missing program counts.
 */
export async function programInstalled(program: string): Promise<boolean> {
  return run(program, ['--version']).then(
    () => true,
    (error: NodeJS.ErrnoException) => error.code !== 'ENOENT',
  );
}

/** Whether h2load is on the PATH. */
export const h2loadInstalled = (): Promise<boolean> => programInstalled('h2load');

/** The file h2load sends: one request of `width` FP32 values (0, 1, ...) to `model`, framed for gRPC. */
export async function grpcRequestFile(model: string, width: number): Promise<string> {
  const dir = join(CACHE_DIR, 'h2load');
  await mkdir(dir, { recursive: true });
  const file = join(dir, `${model}-${width}.grpc`);
  await writeFile(
    file,
    encodeFp32InferRequest(
      model,
      width,
      Float32Array.from({ length: width }, (_, i) => i),
    ),
  );
  return file;
}

/** h2load for `seconds` on `address` (host:port) with ModelInfer requests from `requestFile`. */
export async function h2loadGrpc(options: {
  address: string;
  requestFile: string;
  connections: number;
  streams: number;
  seconds: number;
  /**
   * Log every request for the percentiles (the client then writes a line per request, which costs it CPU
   * the server's cores share); without it p50 and p99 are NaN and `meanMs` is h2load's own. @default true
   */
  latencies?: boolean;
}): Promise<H2loadResult> {
  const { address, requestFile, connections, streams, seconds } = options;
  return runH2load(
    [
      `-c${connections}`,
      `-m${streams}`,
      `--data=${requestFile}`,
      '-H',
      'content-type: application/grpc',
      '-H',
      'te: trailers',
      `http://${address}${MODEL_INFER_PATH}`,
    ],
    seconds,
    options.latencies !== false,
  );
}

/** The HTTP binary request h2load sends to `model`: one request of `width` FP32 values, as the lean client's. */
export async function httpRequestFile(model: string, width: number): Promise<{ file: string; headers: Record<string, string> }> {
  const dir = join(CACHE_DIR, 'h2load');
  await mkdir(dir, { recursive: true });
  const { headers, body } = encodeHttpInferRequest(fp32InferRequest(model, width));
  const file = join(dir, `${model}-${width}.bin`);
  await writeFile(file, body);
  return { file, headers };
}

/**
 * h2load over HTTP/1.1 (`--h1`: one request at a time on each of `connections` connections, a closed loop of
 * that many clients) for `seconds` after `warmUpSeconds`, POSTing `request` to `url`; every request logged.
 */
export async function h2loadHttp(options: {
  url: string;
  request: { file: string; headers: Record<string, string> };
  connections: number;
  seconds: number;
  warmUpSeconds?: number;
}): Promise<H2loadResult> {
  const headers = Object.entries(options.request.headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]);
  return runH2load(
    ['--h1', `-c${options.connections}`, `--data=${options.request.file}`, ...headers, options.url],
    options.seconds,
    true,
    options.warmUpSeconds,
  );
}

/** h2load on one thread for `seconds` (after `warmUpSeconds`) with `args`; with `latencies`, every request logged and the percentiles read from the log. */
async function runH2load(args: readonly string[], seconds: number, latencies: boolean, warmUpSeconds?: number): Promise<H2loadResult> {
  const logFile = latencies ? join(CACHE_DIR, 'h2load', `log-${process.pid}-${Date.now()}.tsv`) : undefined;
  // In milliseconds (h2load takes units): a smoke run measures a fraction of a second.
  const durationMs = Math.max(100, Math.round(seconds * 1000));
  try {
    const warmUp = warmUpSeconds ? [`--warm-up-time=${Math.round(warmUpSeconds * 1000)}ms`] : [];
    const { stdout } = await run(
      'h2load',
      ['-t1', `-D${durationMs}ms`, ...warmUp, ...(logFile ? [`--log-file=${logFile}`] : []), ...args],
      {
        maxBuffer: 16 * 1024 * 1024,
      },
    );
    // With a warm-up, "finished in" counts it too: the log and the rates cover the measured duration.
    const finished = /finished in ([\d.]+)(ms|s),/.exec(stdout);
    const measuredSeconds = warmUpSeconds
      ? durationMs / 1000
      : finished
        ? Number(finished[1]) / (finished[2] === 'ms' ? 1000 : 1)
        : seconds;
    const failed = /requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(stdout);
    // "time for request:  min  max  mean  sd  +/- sd", each with its unit.
    const mean = /time for request:\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)/.exec(stdout);
    const meanMs = mean ? Number(mean[1]) * { us: 0.001, ms: 1, s: 1000 }[mean[2] as 'us' | 'ms' | 's'] : NaN;
    if (!logFile) {
      const succeeded = failed ? Number(failed[1]) : 0;
      return {
        perSecond: succeeded / measuredSeconds,
        requests: succeeded,
        errors: failed ? Number(failed[2]) + Number(failed[3]) : 0,
        statusPerSecond: {},
        p50Ms: NaN,
        p90Ms: NaN,
        p99Ms: NaN,
        meanMs,
        seconds: measuredSeconds,
      };
    }
    // Each line: start time (us since the epoch), HTTP status (-1 for a failed stream), duration (us).
    const lines = (await readFile(logFile, 'utf8')).split('\n').filter(Boolean);
    const durations: number[] = [];
    const statuses: Record<number, number> = {};
    for (const line of lines) {
      const [, status, us] = line.split('\t');
      statuses[Number(status)] = (statuses[Number(status)] ?? 0) + 1;
      if (status === '200') durations.push(Number(us) / 1000);
    }
    durations.sort((a, b) => a - b);
    const at = (q: number) => (durations.length === 0 ? NaN : durations[Math.min(durations.length - 1, Math.floor(q * durations.length))]!);
    const statusPerSecond = Object.fromEntries(Object.entries(statuses).map(([s, n]) => [s, n / measuredSeconds]));
    return {
      perSecond: durations.length / measuredSeconds,
      requests: durations.length,
      errors: Math.max(lines.length - durations.length, failed ? Number(failed[2]) + Number(failed[3]) : 0),
      statusPerSecond,
      p50Ms: at(0.5),
      p90Ms: at(0.9),
      p99Ms: at(0.99),
      meanMs,
      seconds: measuredSeconds,
    };
  } finally {
    if (logFile) await rm(logFile, { force: true });
  }
}
