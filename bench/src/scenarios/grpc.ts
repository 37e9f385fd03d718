import { startServerProcess } from '@batchwise/server/test-support/server-process.ts';
import { cpuSnapshot } from '../cpu-usage.ts';
import { grpcRequestFile, h2loadGrpc, h2loadInstalled, type H2loadResult } from '../h2load.ts';
import { environment, ratioCheck, reportScenario, uncheckedRatioNotes, type Check } from '../report.ts';
import { TICKS_PER_SECOND } from '../threads.ts';
import { OVERHEAD_MODELS, OVERHEAD_WIDTH, overheadRepository, startPeer } from './overhead.ts';
import { wrkInstalled, wrkLatency, wrkScript } from './wrk-check.ts';

/** Issue 44's gRPC targets, ratios of one run. */
export const GRPC_TARGETS_44 = { cpuOverPeer: 1.3, p50OverPeerC1: 1.5, oneChannelOverHttp: 1 } as const;

/** A load: connections of concurrent streams each (h2load -c, -m); HTTP has one request per connection at a time. */
export interface GrpcLoad {
  readonly name: string;
  readonly connections: number;
  readonly streams: number;
}

/** The loads; only the one-stream load logs every request (the p50 check reads it), the others report h2load's mean. */
export const GRPC_LOADS: readonly GrpcLoad[] = [
  { name: '16x1', connections: 16, streams: 1 },
  { name: '1x16', connections: 1, streams: 16 },
  { name: '1x1', connections: 1, streams: 1 },
];

/**
 * The bare grpc-js peer, and the server's two models, over gRPC; the models over HTTP binary (wrk) beside them.
 * `bare`: Node's transports alone (bench/src/bare-transport-server.ts), node:http2 at one connection of 16
 * streams and node:http at 16 connections, the ceiling of the one-channel ratio on Node.
 */
type GrpcTarget = 'peer' | 'onnx' | 'js' | 'bare';
const TARGETS: readonly GrpcTarget[] = ['peer', 'onnx', 'js'];
const ONE_CHANNEL = GRPC_LOADS[1]!;

export interface GrpcRow {
  readonly target: GrpcTarget;
  readonly protocol: 'grpc' | 'http-binary';
  readonly load: string;
  readonly perSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly meanMs: number;
  readonly errors: number;
  /** CPU of the answering process per answered request, microseconds. */
  readonly cpuUsPerRequest: number;
}

/**
 * gRPC at the cost of a bare grpc-js server (issue 44): the 16-float identity as an ONNX model (`tiny`) and as a
 * JavaScript model (`tiny_js`) over gRPC ModelInfer, against a bare @grpc/grpc-js server that decodes the same
 * ModelInferRequest with proto-loader and answers its input back (bench/src/grpc-echo-server.ts), each with
 * h2load at 16 connections of one stream, one connection of 16 streams, and one stream; the same models over
 * HTTP binary at 16 connections with wrk, the one-channel comparison, beside Node's transports alone on the same
 * two loads (bare-transport-server.ts: that comparison's ceiling on Node). Each round measures every target at every
 * load, in an order reversed from round to round; ratios compare the medians over rounds. CPU per request is the
 * answering process's (/proc), every thread of it. Skipped, saying so, where h2load or wrk is missing.
 */
export async function runGrpc(options: {
  seconds: number;
  rounds: number;
  log: (line: string) => void;
  name?: string;
  /** Seconds of each target's unrecorded first load (1); 0 skips them (the smoke test). */
  warmUpSeconds?: number;
}): Promise<{ rows: GrpcRow[]; ratios: Record<string, number>; checks: Check[] }> {
  const { log, seconds } = options;
  if (!(await h2loadInstalled()) || !(await wrkInstalled())) {
    log('grpc: h2load (nghttp2-client) and wrk are needed (apt-get install nghttp2-client wrk): skipped');
    return { rows: [], ratios: {}, checks: [] };
  }
  const env = environment();
  const { repo } = await overheadRepository('grpc', log);
  const requestFiles = {
    onnx: await grpcRequestFile(OVERHEAD_MODELS.onnx, OVERHEAD_WIDTH),
    js: await grpcRequestFile(OVERHEAD_MODELS.js, OVERHEAD_WIDTH),
  };
  const scripts = {
    onnx: await wrkScript(OVERHEAD_MODELS.onnx, OVERHEAD_WIDTH),
    js: await wrkScript(OVERHEAD_MODELS.js, OVERHEAD_WIDTH),
  };
  const peerStart = startPeer('grpc-echo-server.ts');
  const bareStarts = { http1: startPeer('bare-transport-server.ts', ['http1']), http2: startPeer('bare-transport-server.ts', ['http2']) };
  const serverStart = startServerProcess(['--model-repository', repo]);
  const rows: GrpcRow[] = [];
  try {
    const [peer, server, bareHttp1, bareHttp2] = await Promise.all([peerStart, serverStart, bareStarts.http1, bareStarts.http2]);
    const serverPid = server.child.pid!;
    /** Who answers each target's gRPC calls: its process and its address. */
    const grpcAnswerer: Record<GrpcTarget, { pid: number; address: string }> = {
      peer: { pid: peer.pid, address: peer.url.replace('http://', '') },
      bare: { pid: bareHttp2.pid, address: bareHttp2.url.replace('http://', '') },
      onnx: { pid: serverPid, address: server.grpcAddress },
      js: { pid: serverPid, address: server.grpcAddress },
    };
    /** CPU seconds of `pid` while `work` runs. */
    const withCpu = async <T>(pid: number, work: () => Promise<T>): Promise<{ result: T; cpuSeconds: number }> => {
      const before = cpuSnapshot([pid]);
      const result = await work();
      const after = cpuSnapshot([pid]);
      return { result, cpuSeconds: ((after?.pidTicks[0] ?? NaN) - (before?.pidTicks[0] ?? NaN)) / TICKS_PER_SECOND };
    };
    const grpcRow = async (target: GrpcTarget, load: GrpcLoad, measuredSeconds: number): Promise<GrpcRow> => {
      const { pid, address } = grpcAnswerer[target];
      const measure = () =>
        h2loadGrpc({
          address,
          requestFile: requestFiles[target === 'js' ? 'js' : 'onnx'],
          connections: load.connections,
          streams: load.streams,
          seconds: measuredSeconds,
          // Percentiles where a check reads them (one stream); elsewhere the client spares its per-request log.
          latencies: load.streams * load.connections === 1,
        });
      const { result, cpuSeconds } = await withCpu(pid, measure);
      return row(target, 'grpc', load.name, result, cpuSeconds);
    };
    const httpRow = async (target: 'onnx' | 'js' | 'bare', measuredSeconds: number): Promise<GrpcRow> => {
      const model = OVERHEAD_MODELS[target === 'js' ? 'js' : 'onnx'];
      const script = scripts[target === 'js' ? 'js' : 'onnx'];
      const [pid, url] = target === 'bare' ? [bareHttp1.pid, bareHttp1.url] : [serverPid, server.httpUrl];
      const { result, cpuSeconds } = await withCpu(pid, () => wrkLatency(url, model, script, 16, measuredSeconds));
      return row(target, 'http-binary', '16', result, cpuSeconds);
    };
    // One unrecorded second of each first: nothing is measured cold.
    const warmUp = options.warmUpSeconds ?? 1;
    if (warmUp > 0) {
      for (const target of TARGETS) await grpcRow(target, GRPC_LOADS[0]!, warmUp);
      await grpcRow('bare', ONE_CHANNEL, warmUp);
      for (const target of ['onnx', 'js', 'bare'] as const) await httpRow(target, warmUp);
    }
    for (let round = 0; round < options.rounds; round++) {
      const order = round % 2 === 0 ? TARGETS : [...TARGETS].reverse();
      for (const load of GRPC_LOADS) {
        for (const target of load === ONE_CHANNEL ? [...order, 'bare' as const] : order) {
          const measured = await grpcRow(target, load, seconds);
          const latency = Number.isNaN(measured.p50Ms) ? `mean ${measured.meanMs.toFixed(3)}` : `p50 ${measured.p50Ms.toFixed(3)}`;
          log(
            `  ${target} grpc ${load.name}: ${measured.perSecond.toFixed(0)}/s, ${latency} ms, ${measured.cpuUsPerRequest.toFixed(0)} us/req`,
          );
          rows.push(measured);
        }
      }
      for (const target of round % 2 === 0 ? (['onnx', 'js', 'bare'] as const) : (['bare', 'js', 'onnx'] as const)) {
        const measured = await httpRow(target, seconds);
        log(`  ${target} http-binary 16: ${measured.perSecond.toFixed(0)}/s, ${measured.cpuUsPerRequest.toFixed(0)} us/req`);
        rows.push(measured);
      }
    }
  } finally {
    await Promise.allSettled([
      ...[peerStart, bareStarts.http1, bareStarts.http2].map((start) => start.then((p) => p.stop())),
      serverStart.then((s) => s.stop()),
    ]);
  }

  const median = (target: GrpcTarget, protocol: GrpcRow['protocol'], load: string, of: (r: GrpcRow) => number): number => {
    const values = rows
      .filter((r) => r.target === target && r.protocol === protocol && r.load === load)
      .map(of)
      .sort((a, b) => a - b);
    return values.length === 0 ? NaN : values[(values.length - 1) >> 1]!;
  };
  const ratios: Record<string, number> = {};
  const checks: Check[] = [];
  const T = GRPC_TARGETS_44;
  for (const target of ['onnx', 'js'] as const) {
    for (const load of ['16x1', '1x16']) {
      const name = `grpc_cpu_${target}_vs_peer_${load}`;
      ratios[name] = median(target, 'grpc', load, (r) => r.cpuUsPerRequest) / median('peer', 'grpc', load, (r) => r.cpuUsPerRequest);
      checks.push(ratioCheck(name, ratios[name]!, { atMost: T.cpuOverPeer }));
    }
    const p50 = `grpc_p50_${target}_vs_peer_1x1`;
    ratios[p50] = median(target, 'grpc', '1x1', (r) => r.p50Ms) / median('peer', 'grpc', '1x1', (r) => r.p50Ms);
    checks.push(ratioCheck(p50, ratios[p50]!, { atMost: T.p50OverPeerC1 }));
    const channel = `grpc_1x16_vs_http_16_${target}`;
    ratios[channel] = median(target, 'grpc', '1x16', (r) => r.perSecond) / median(target, 'http-binary', '16', (r) => r.perSecond);
    checks.push(ratioCheck(channel, ratios[channel]!, { atLeast: T.oneChannelOverHttp }));
    ratios[`grpc_cpu_${target}_1x16_vs_http_16`] =
      median(target, 'grpc', '1x16', (r) => r.cpuUsPerRequest) / median(target, 'http-binary', '16', (r) => r.cpuUsPerRequest);
  }
  // The same ratio for Node's transports alone: what the one-channel check can reach on this machine.
  ratios['bare_transport_1x16_vs_http_16'] =
    median('bare', 'grpc', '1x16', (r) => r.perSecond) / median('bare', 'http-binary', '16', (r) => r.perSecond);

  const label = {
    peer: 'bare grpc-js',
    onnx: `batchwise ${OVERHEAD_MODELS.onnx}`,
    js: `batchwise ${OVERHEAD_MODELS.js}`,
    bare: 'bare node:http2 / node:http',
  };
  await reportScenario(
    {
      name: options.name ?? 'grpc',
      title: 'pnpm bench grpc: ModelInfer against a bare @grpc/grpc-js server, h2load and wrk as the clients',
      intro:
        `The 16-float identity (ONNX and JavaScript) over gRPC with h2load (connections x streams) and over HTTP binary ` +
        `with wrk (16 connections), against a bare grpc-js server answering the same ModelInferRequest, and Node's ` +
        `transports alone (node:http2 at 1x16, node:http at 16) answering the request's bytes; cores: the answering ` +
        `process's CPU over the row's time; ` +
        `${options.rounds} rounds of ${seconds} s per row, medians compared (${env['date']}).`,
      tables: [
        {
          headers: ['target', 'protocol', 'load', 'req/s', 'p50 ms', 'p99 ms', 'mean ms', 'errors', 'cpu us/req', 'cores'],
          rows: rows.map((r) => [
            label[r.target],
            r.protocol,
            r.load,
            r.perSecond,
            r.p50Ms.toFixed(3),
            r.p99Ms.toFixed(3),
            r.meanMs.toFixed(3),
            r.errors,
            Math.round(r.cpuUsPerRequest),
            ((r.cpuUsPerRequest * r.perSecond) / 1e6).toFixed(2),
          ]),
        },
      ],
      notes: uncheckedRatioNotes(ratios, checks),
      checks,
      json: { environment: env, seconds, rounds: options.rounds, rows, ratios, checks },
    },
    log,
  );
  return { rows, ratios, checks };
}

function row(
  target: GrpcTarget,
  protocol: GrpcRow['protocol'],
  load: string,
  result: Pick<H2loadResult, 'perSecond' | 'p50Ms' | 'p99Ms' | 'errors' | 'requests'> & { meanMs?: number },
  cpuSeconds: number,
): GrpcRow {
  return {
    target,
    protocol,
    load,
    perSecond: result.perSecond,
    p50Ms: result.p50Ms,
    p99Ms: result.p99Ms,
    meanMs: result.meanMs ?? NaN,
    errors: result.errors,
    cpuUsPerRequest: result.requests > 0 ? (cpuSeconds * 1e6) / result.requests : NaN,
  };
}
