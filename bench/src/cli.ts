/**
 * `pnpm bench <scenario...> [options]`: batching | limit | efficiency | overhead | builds | startup | grpc | objective-overload | objective-curve | overload | many-elements | shutdown | ensemble | tracing | rate-limit | adaptive | sequences | streaming | handoff | python | tune | wrk-check | all.
 * Results: a table on the terminal, bench/results/<scenario>.json and, where it applies, .svg and .md.
 * `pnpm bench` builds first (`pnpm build`) and runs the compiled server unless BATCHWISE_SERVER_CLI says otherwise.
 */
import { FULL_WINDOWS, SMOKE_WINDOWS, type WindowOptions } from '@batchwise/client/load';
import { FULL_MODEL, SMOKE_MODEL, runBatching } from './scenarios/batching.ts';
import { runLimit } from './scenarios/limit.ts';
import { QUICK_WINDOWS, runOverhead } from './scenarios/overhead.ts';
import { runBuilds } from './scenarios/builds.ts';
import { runEfficiency } from './scenarios/efficiency.ts';
import { OBJECTIVE_OVERLOAD_MODEL, runObjectiveOverload } from './scenarios/objective-overload.ts';
import { runObjectiveCurve } from './scenarios/objective-curve.ts';
import { runWrkCheck } from './scenarios/wrk-check.ts';
import { runGrpc } from './scenarios/grpc.ts';
import { runEnsemble } from './scenarios/ensemble.ts';
import { runManyElements } from './scenarios/many-elements.ts';
import { runOverload } from './scenarios/overload.ts';
import { runRateLimit } from './scenarios/rate-limit.ts';
import { runShutdown } from './scenarios/shutdown.ts';
import { runStartup } from './scenarios/startup.ts';
import { runTracing } from './scenarios/tracing.ts';
import { runTune } from './scenarios/tune.ts';
import { runAdaptive } from './scenarios/adaptive.ts';
import { MANY_MODELS, runManyModels } from './scenarios/many-models.ts';
import { runSequences, SEQUENCES } from './scenarios/sequences.ts';
import { runStreaming, STREAMING } from './scenarios/streaming.ts';
import { runHandoff } from './scenarios/handoff.ts';
import { runPython } from './scenarios/python.ts';
import { PROTOCOLS, type Protocol } from './workload.ts';

const USAGE = `usage: pnpm bench <scenario...> [options]

scenarios (several run in order; 'all' runs every one):
  batching   4x2048 FP32 MLP, batching off and on, HTTP binary, concurrency 1..32; batching on
             at c=1 and the top compared with the model in-process, measured side by side
  limit      the same model in-process (ONNX Runtime, same threads) at the batch sizes
             the last batching run formed; reports that run's paired ratios
  efficiency the batching-on 4x2048 MLP at 16 clients (lean HTTP binary client) against the same
             model in-process on the batches the server formed: rows per CPU-second and rows per
             second, the server's CPU per thread group; PASS/MISS (issue 30)
  overhead   16-float identity, ONNX and JavaScript, over HTTP binary vs a bare fastify echo and a
             naive fastify + onnxruntime-node peer (session.run in the route), one and 16 clients
             (lean client): p50 and server CPU per request over the echo's, throughput over the
             naive peer's; then one connection with wrk where installed: p50 and the answering
             process's CPU per request over the echo's and the naive peer's; PASS/MISS (issues 34, 44);
             --quick: about 45 s (one pass, one wrk round), with one short round of the grpc scenario; run it before every
             commit that touches the request path
  builds     issue 34's bisect: the compiled servers of several checkouts (--builds <dirA>,<dirB>,...,
             each with packages/server/dist built) side by side with the bare fastify echo on the
             overhead repository (tiny, tiny_js), interleaved in one run: --rounds (4) rounds, each
             measuring at every --concurrency (16,1) and model the echo and every build in an order
             rotated and reversed from round to round, windows of --window-ms (750) ms: server CPU per
             request, p50, req/s, ratios over the same round's echo, medians over rounds, and each
             build's CPU per request over the build given before it (not part of 'all')
  startup    examples/model_repository from spawn to ready (the log line "model repository loaded"):
             \`pnpm start\` (the sources through tsx) and the compiled server, each cold (every compile
             cache emptied: tsx's, under a TMPDIR of the scenario's, and the server package's
             node_modules/.cache) and warm; wall and CPU seconds, medians of --rounds (3) rounds over
             --checkouts (<dir>,<dir>; this one by default, each installed and built), interleaved
             (not part of 'all'; it empties the checkouts' caches: run it alone)
  grpc       issue 44: the 16-float identity (ONNX and JavaScript) over gRPC ModelInfer with h2load
             (16 connections x 1 stream, 1 x 16, 1 x 1) against a bare @grpc/grpc-js server answering
             the same request (proto-loader decoding), and over HTTP binary with wrk (16 connections):
             req/s, p50/p99, CPU per request of the answering process, medians of 3 rounds; PASS/MISS:
             CPU <= 1.3x the bare server's, one-stream p50 <= 1.5x, one channel of 16 streams >= 16
             HTTP connections, beside the same ratio for Node's transports alone (bare node:http2 and
             node:http; needs h2load from nghttp2-client, and wrk); then gRPC (grpc-js client)
             vs HTTP binary on the batching model (c=16)
  objective-overload
             6x1024 MLP with and without a latency objective (4x its one-client p50), closed loop
             at 4, 16, 64, 256 clients and open loop at 2x saturated (lean HTTP binary client):
             200s and 503s per second, p50/p99 of the 200s, CPU, what refusals cost; PASS/MISS
             (issues 30 and 44);
             --objective-ms=<ms> fixes the objective (for A/B runs: that p50 varies run to run)
  objective-curve
             issue 44: the same MLP at 64 clients measured by h2load (HTTP/1.1, every request
             logged): static and twins at 0.65, 0.8, 1, 1.25 and 1.6x the objective (4x the
             one-client p50, or --objective-ms), --rounds (2) interleaved rounds of --seconds (8):
             200s over static and p99 over the objective per twin, and the best throughput whose
             p99 keeps 1.25x its objective; PASS/MISS at the objective (needs h2load)
  overload   4x the saturated rate for 60 s: 503s, memory, readiness; then requests of 20M tiny
             elements (gRPC, HTTP JSON and binary) against a 1 GiB budget: each refused within
             1 s or served, another client unharmed, peak RSS (many-elements also runs it alone)
  shutdown   SIGTERM under load: nothing admitted is lost
  ensemble   the text_classification pipeline (examples/model_repository) as an ensemble vs its
             four steps chained by the client over HTTP binary, c=1 and 16; the encoder's mean
             batch at c=16; a one-step ensemble around the tiny model vs the model direct (c=16)
  tracing    16-float identity over HTTP binary at c=16: tracing off vs OpenTelemetry (OTLP HTTP
             to a receiver the bench starts on loopback) at rate=1000 and at rate=1
  rate-limit two JavaScript models sharing one rate limiter resource of count 1, priorities 1
             and 2, 8 clients each: each one's share of executions against the priorities,
             and the most executions at once (must be 1)
  adaptive   4x2048 MLP, open loop through quiet, steady and burst (2x saturated) phases: the
             default dynamic_batching {}, the best static config (--static-config) and a latency
             objective of 4x the batch-1 latency; p50/p99, goodput, shed; PASS/MISS per target
  many-models
             40 MLPs that together take 4x --model-memory-limit, Zipf(1.1) popularity, 16 closed-loop
             clients for 60 s: --load-on-demand under the limit, every model loaded, and a naive
             unload after every request; failures (must be 0), hit rate, p50/p99 of hits and of
             requests that waited, peak RSS against the limit, evictions per minute (issue 27; not
             part of 'all')
  sequences  a recurrent cell whose state the server keeps (implicit state), 64 interleaved sequences of
             20 steps over HTTP binary, the direct strategy against oldest: throughput, p50/p99 of a
             step, mean batch (issue 28; not part of 'all')
  handoff    a round trip to a worker thread and back with no server: Atomics.wait in both threads
             (the floor of two wake-ups), the worker in Atomics.wait and the main thread's event loop
             woken by Atomics.waitAsync, Atomics.waitAsync on both event loops, and the JavaScript
             backend's MessagePort messages; wall and CPU per round trip (issue 34)
  streaming  the text_generation example as one decoupled JavaScript model and as Triton's ensemble
             (tokenizer -> decoupled generator -> detokenizer), each calling the next_token ONNX model
             per token, over HTTP generate_stream, 1 and 16 concurrent streams of 64 tokens for
             --duration-ms (10000) each: tokens/s, time to first token p50/p99, time between tokens
             p99, next_token's and the detokenizer's mean batch; PASS/MISS: the single model at 16
             streams >= 4x one stream's tokens/s, mean batch >= 4 (issue 31); the ensemble at 16
             streams >= 0.8x the single model's tokens/s (issue 36)
  python     issue 43: Triton's Python backend (one process per instance) against the JavaScript
             backend, 2 instances each: a blank model (16 floats, its input back) at 1 and 16 clients
             and a preprocessing model (a 2048-float row standardized and clipped, numpy against a
             JavaScript loop) at 16 (lean HTTP binary client), then the blank models' one-connection
             p50 from wrk (when installed): p50, p99, req/s and the server's CPU per request with its
             Python processes'; PASS/MISS: Python p50 at c=1 <= 1.5x JavaScript's, throughput at c=16
             >= 0.7x, CPU per request <= 2x; --quick: short windows (under a minute; not part of 'all')
  tune       \`batchwise tune\` on the 4x2048 MLP with the default config (dynamic_batching {}),
             objective --objective (50ms), budget --budget (10m); PASS/MISS: >= 1.5x the default's
             throughput at an equal or lower p99, in under 10 minutes (not part of 'all')
  wrk-check  the lean client against wrk (if installed) on the echo and the 16-float identity,
             1 and 16 connections: requests/s of each (not part of 'all')

options:
  --smoke                  tiny model and windows (also BENCH_SMOKE=1); results named smoke-*
  --quick                  overhead and python only: short windows (overhead about 45 s in all);
                           results named overhead-quick, python-quick
  --concurrency=1,2,4      closed-loop sweep (batching)
  --rate=100,200           open-loop sweep in requests/s (batching; alone, instead of the
                           closed-loop sweep; outstanding requests bounded to 256)
  --arrivals=poisson       open-loop arrivals: poisson (default) or constant
  --protocol=http-binary   http-binary, http-json, grpc, grpc-raw; comma-separated for several (batching)
  --window-ms=2000         measurement window; --max-windows=6; --tolerance=0.1
  --builds=<dir>,<dir>     builds: the checkouts to compare; --rounds=4: how many interleaved rounds
  --checkouts=<dir>,<dir>  startup: the checkouts to compare (this one by default); --rounds=3
  --static-config <path>   adaptive: the static config to compare (e.g. batchwise tune's
                           recommended.config.pbtxt); without it a fixed 1 ms delay
  --phase-ms=20000         adaptive: length of each phase
  --duration-ms=60000      many-models: how long each configuration serves the traffic;
                           streaming: how long each concurrency is measured (10000)
  BENCH_DELAY_US=1000      max_queue_delay_microseconds of the batching-on configuration
  --objective=50ms         tune: the latency objective; --budget=10m: its time budget
  --start=dynamic          tune: start from dynamic_batching { } (dynamic) or from no dynamic_batching (plain)`;

const args = process.argv.slice(2);
// Scenarios run the compiled server, as the image does (`pnpm bench` builds first), unless told otherwise.
process.env['BATCHWISE_SERVER_CLI'] ??= 'compiled';
if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
/** `--name=value` or `--name value`. */
const option = (name: string): string | undefined => {
  const i = args.indexOf(`--${name}`);
  if (i >= 0) return args[i + 1];
  return args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
};
/** Options that take a value: given as `--name value`, the value is not a scenario name. */
const VALUE_OPTIONS = new Set(
  [
    'static-config',
    'builds',
    'checkouts',
    'rounds',
    'concurrency',
    'rate',
    'arrivals',
    'protocol',
    'window-ms',
    'max-windows',
    'tolerance',
    'phase-ms',
    'duration-ms',
    'objective',
    'objective-ms',
    'budget',
    'start',
    'seconds',
  ].map((name) => `--${name}`),
);
const staticConfig = option('static-config');
const list = (name: string): number[] | undefined => option(name)?.split(',').map(Number);
const smoke = args.includes('--smoke') || process.env['BENCH_SMOKE'] === '1';
const quick = args.includes('--quick');
const prefix = smoke ? 'smoke-' : '';
const log = (line: string) => process.stdout.write(`${line}\n`);
const base = smoke ? SMOKE_WINDOWS : quick ? QUICK_WINDOWS : FULL_WINDOWS;
const windows: WindowOptions = {
  ...base,
  windowMs: Number(option('window-ms') ?? base.windowMs),
  maxWindows: Number(option('max-windows') ?? base.maxWindows),
  tolerance: Number(option('tolerance') ?? base.tolerance),
};
const model = smoke ? SMOKE_MODEL : FULL_MODEL;
const rates = list('rate');
// --rate alone sweeps rates only; with --concurrency too, both.
const concurrencies = list('concurrency') ?? (rates ? [] : smoke ? [1, 4] : [1, 2, 4, 8, 16, 32]);
const arrivals = option('arrivals') ?? 'poisson';
const protocols = (option('protocol')?.split(',') ?? ['http-binary']) as Protocol[];
for (const p of protocols) if (!PROTOCOLS.includes(p)) fail(`unknown protocol '${p}'`);
if (arrivals !== 'poisson' && arrivals !== 'constant') fail(`unknown arrivals '${arrivals}'`);
for (const n of [...concurrencies, ...(rates ?? []), windows.windowMs, windows.maxWindows]) {
  if (!(n > 0)) fail(`expected positive numbers, got ${n}`);
}

const scenarios: Record<string, () => Promise<unknown>> = {
  batching: () =>
    runBatching({ model, concurrencies, ...(rates && { rates, arrivals }), windows, protocols, log, name: `${prefix}batching` }),
  limit: () => runLimit({ model, durationMs: smoke ? 100 : 1500, log, name: `${prefix}limit`, batchingName: `${prefix}batching` }),
  overhead: async () => {
    await runOverhead({
      concurrencies: [1, 16],
      windows,
      // --quick must fit the stop hook's time limit: one pass, one wrk round (about 45 s with gRPC).
      mirrored: !smoke && !quick,
      wrkSeconds: smoke ? 1 : quick ? 2 : 4,
      wrkRounds: smoke || quick ? 1 : 3,
      log,
      name: `${prefix}overhead${quick ? '-quick' : ''}`,
    });
    // The guard covers gRPC too (issue 44): one short round.
    if (quick || smoke) await runGrpc({ seconds: 1, rounds: 1, log, name: `${prefix}grpc${quick ? '-quick' : ''}` });
  },
  efficiency: () => runEfficiency({ model, concurrency: 16, windows, log, name: `${prefix}efficiency` }),
  'objective-overload': () =>
    runObjectiveOverload({
      model: smoke ? model : OBJECTIVE_OVERLOAD_MODEL,
      concurrencies: [4, 16, 64, 256],
      windows,
      log,
      name: `${prefix}objective-overload`,
      ...(option('objective-ms') !== undefined && { objectiveMs: Number(option('objective-ms')) }),
    }),
  'objective-curve': () =>
    runObjectiveCurve({
      model: smoke ? model : OBJECTIVE_OVERLOAD_MODEL,
      seconds: Number(option('seconds') ?? (smoke ? 1 : 8)),
      rounds: Number(option('rounds') ?? (smoke ? 1 : 2)),
      log,
      name: `${prefix}objective-curve`,
      ...(option('objective-ms') !== undefined && { objectiveMs: Number(option('objective-ms')) }),
    }),
  'wrk-check': () => runWrkCheck({ concurrencies: [1, 16], durationMs: smoke ? 1000 : 10_000, log, name: `${prefix}wrk-check` }),
  overload: async () => {
    await runOverload({ model, durationMs: smoke ? 1000 : 60_000, memoryLimit: smoke ? '0.8' : '2G', windows, log });
    await scenarios['many-elements']!();
  },
  'many-elements': () =>
    runManyElements({ elements: smoke ? 200_000 : 20_000_000, memoryLimit: '1G', log, name: `${prefix}many-elements` }),
  shutdown: () => runShutdown({ model, concurrency: smoke ? 4 : 16, loadMs: smoke ? 500 : 3000, log }),
  tracing: () => runTracing({ concurrency: smoke ? 4 : 16, windows, log, name: `${prefix}tracing` }),
  'rate-limit': () =>
    runRateLimit({ concurrency: smoke ? 2 : 8, durationMs: smoke ? 600 : 20_000, holdMs: smoke ? 2 : 5, log, name: `${prefix}rate-limit` }),
  tune: async () => {
    const start = option('start') ?? 'dynamic';
    if (start !== 'dynamic' && start !== 'plain') throw new Error(`--start must be dynamic or plain, not '${start}'`);
    const { pass } = await runTune({
      model,
      start,
      objective: option('objective') ?? '50ms',
      budget: option('budget') ?? (smoke ? '2m' : '10m'),
      extraArgs: smoke ? ['--concurrency', '1,4', '--window-ms', '200', '--max-windows', '1', '--max-candidates', '3'] : [],
      log,
      name: `${prefix}tune${start === 'plain' ? '-plain' : ''}`,
    });
    if (!pass) process.exitCode = 1;
  },
  adaptive: () =>
    runAdaptive({
      model,
      phaseMs: Number(option('phase-ms') ?? (smoke ? 300 : 20_000)),
      windows,
      ...(staticConfig !== undefined && { staticConfig }),
      log,
      name: `${prefix}adaptive`,
    }),
  'many-models': async () => {
    const runs = await runManyModels({
      models: smoke ? 8 : MANY_MODELS.models,
      width: smoke ? 128 : 768,
      clients: smoke ? 4 : MANY_MODELS.clients,
      durationMs: Number(option('duration-ms') ?? (smoke ? 1500 : 60_000)),
      log,
      name: `${prefix}many-models`,
    });
    if (runs[0]!.failed > 0) process.exitCode = 1;
  },
  python: () =>
    runPython({
      concurrencies: [1, 16],
      windows,
      wrkSeconds: smoke ? 1 : quick ? 2 : 5,
      mirrored: !smoke,
      log,
      name: `${prefix}python${quick ? '-quick' : ''}`,
    }),
  handoff: () => runHandoff({ roundTrips: smoke ? 200 : 20_000, rounds: smoke ? 1 : 5, log, name: `${prefix}handoff` }),
  streaming: () =>
    runStreaming({
      concurrencies: smoke ? [1, 4] : STREAMING.concurrencies,
      tokens: smoke ? 8 : STREAMING.tokens,
      durationMs: Number(option('duration-ms') ?? (smoke ? 300 : 10_000)),
      log,
      name: `${prefix}streaming`,
    }),
  sequences: async () => {
    const runs = await runSequences({
      clients: smoke ? 8 : SEQUENCES.clients,
      steps: smoke ? 4 : SEQUENCES.steps,
      rounds: smoke ? 1 : 5,
      width: smoke ? 64 : SEQUENCES.width,
      log,
      name: `${prefix}sequences`,
    });
    if (runs.some((r) => r.errors > 0)) process.exitCode = 1;
  },
  builds: () =>
    runBuilds({
      builds: (option('builds') ?? fail('builds: --builds <dirA>,<dirB>,... is required')).split(',').filter(Boolean),
      rounds: Number(option('rounds') ?? (smoke ? 1 : 4)),
      concurrencies: list('concurrency') ?? (smoke ? [4] : [16, 1]),
      windows: smoke
        ? SMOKE_WINDOWS
        : { warmupMs: 250, windowMs: Number(option('window-ms') ?? 750), minWindows: 2, maxWindows: 2, tolerance: 1 },
      log,
      name: `${prefix}builds`,
    }),
  startup: () =>
    runStartup({
      checkouts: option('checkouts')?.split(',').filter(Boolean) ?? [new URL('../..', import.meta.url).pathname],
      rounds: Number(option('rounds') ?? (smoke ? 1 : 3)),
      log,
      name: `${prefix}startup`,
    }),
  ensemble: () => runEnsemble({ concurrencies: [1, 16], tinyConcurrency: 16, windows, log, name: `${prefix}ensemble` }),
  grpc: async () => {
    await runGrpc({ seconds: smoke ? 1 : 3, rounds: smoke ? 1 : 3, log, name: `${prefix}grpc` });
    await runBatching({
      model,
      concurrencies: smoke ? [4] : [16],
      windows,
      protocols: ['http-binary', 'grpc'],
      log,
      name: `${prefix}grpc-batching`,
    });
  },
};

function fail(message: string): never {
  process.stderr.write(`${message}\n\n${USAGE}\n`);
  process.exit(2);
}

async function main(): Promise<void> {
  const named = args.filter((a, i) => !a.startsWith('-') && !VALUE_OPTIONS.has(args[i - 1]!));
  const chosen =
    named.length === 0 || named.includes('all')
      ? [
          'batching',
          'limit',
          'efficiency',
          'overhead',
          'grpc',
          'objective-overload',
          'objective-curve',
          'overload',
          'shutdown',
          'ensemble',
          'tracing',
          'rate-limit',
          'adaptive',
          'streaming',
        ]
      : named;
  for (const name of chosen) if (!scenarios[name]) fail(`unknown scenario '${name}'`);
  if (quick && chosen.some((name) => name !== 'overhead' && name !== 'python')) fail('--quick is for overhead and python only');
  for (const name of chosen) {
    log(`== ${name}${smoke ? ' (smoke)' : quick ? ' (quick)' : ''} ==`);
    await scenarios[name]!();
  }
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (error: Error) => {
    process.stderr.write(`${error.stack ?? error.message}\n`);
    process.exit(1);
  },
);
