/**
 * h2load (Debian's nghttp2-client) as the gRPC load client (issue 44): a C client, so the measurement is the
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
import { encodeFp32InferRequest } from './raw-grpc.ts';
import { CACHE_DIR } from './workload.ts';

const run = promisify(execFile);

export const MODEL_INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';

export interface H2loadResult {
  readonly perSecond: number;
  readonly requests: number;
  readonly errors: number;
  readonly p50Ms: number;
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
  const logFile = options.latencies === false ? undefined : join(CACHE_DIR, 'h2load', `log-${process.pid}-${Date.now()}.tsv`);
  const args = [
    `-c${connections}`,
    `-m${streams}`,
    '-t1',
    `-D${Math.max(1, Math.round(seconds))}`,
    ...(logFile ? [`--log-file=${logFile}`] : []),
    `--data=${requestFile}`,
    '-H',
    'content-type: application/grpc',
    '-H',
    'te: trailers',
    `http://${address}${MODEL_INFER_PATH}`,
  ];
  try {
    const { stdout } = await run('h2load', args, { maxBuffer: 16 * 1024 * 1024 });
    const measuredSeconds = Number(/finished in ([\d.]+)s/.exec(stdout)?.[1] ?? seconds);
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
        p50Ms: NaN,
        p99Ms: NaN,
        meanMs,
        seconds: measuredSeconds,
      };
    }
    // Each line: start time (us since the epoch), HTTP status (-1 for a failed stream), duration (us).
    const lines = (await readFile(logFile, 'utf8')).split('\n').filter(Boolean);
    const durations: number[] = [];
    let errors = 0;
    for (const line of lines) {
      const [, status, us] = line.split('\t');
      if (status === '200') durations.push(Number(us) / 1000);
      else errors++;
    }
    durations.sort((a, b) => a - b);
    const at = (q: number) => (durations.length === 0 ? NaN : durations[Math.min(durations.length - 1, Math.floor(q * durations.length))]!);
    return {
      perSecond: durations.length / measuredSeconds,
      requests: durations.length,
      errors: Math.max(errors, failed ? Number(failed[2]) + Number(failed[3]) : 0),
      p50Ms: at(0.5),
      p99Ms: at(0.99),
      meanMs,
      seconds: measuredSeconds,
    };
  } finally {
    if (logFile) await rm(logFile, { force: true });
  }
}
