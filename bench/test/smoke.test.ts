import { describe, expect, it } from 'vitest';
import { SMOKE_WINDOWS } from '@batchwise/client/load';
import { writeResult } from '../src/report.ts';
import { runBatching, SMOKE_MODEL } from '../src/scenarios/batching.ts';
import { runEnsemble, TARGETS } from '../src/scenarios/ensemble.ts';
import { runLimit } from '../src/scenarios/limit.ts';
import { runManyElements } from '../src/scenarios/many-elements.ts';
import { runOverhead, startNaive, tinyModelFile } from '../src/scenarios/overhead.ts';
import { runGrpc } from '../src/scenarios/grpc.ts';
import { h2loadInstalled } from '../src/h2load.ts';
import { wrkInstalled } from '../src/scenarios/wrk-check.ts';
import { runEfficiency } from '../src/scenarios/efficiency.ts';
import { runObjectiveOverload } from '../src/scenarios/objective-overload.ts';
import { runObjectiveCurve } from '../src/scenarios/objective-curve.ts';
import { maxConcurrent, runRateLimit } from '../src/scenarios/rate-limit.ts';
import { runTracing } from '../src/scenarios/tracing.ts';
import { runAdaptive } from '../src/scenarios/adaptive.ts';
import { runManyModels } from '../src/scenarios/many-models.ts';
import { runSequences } from '../src/scenarios/sequences.ts';
import { runStreaming } from '../src/scenarios/streaming.ts';
import { runHandoff } from '../src/scenarios/handoff.ts';
import { readFile } from 'node:fs/promises';
import { HttpClient } from '@batchwise/client';
import { fp32InferRequest } from '../src/lean-http.ts';
import { RESULTS_DIR } from '../src/report.ts';

const log = () => undefined;
/** Shorter still for the scenarios of issue 30, which measure a dozen points each: the smoke test only checks their wiring. */
const QUICK_WINDOWS = { ...SMOKE_WINDOWS, warmupMs: 50, windowMs: 100 };

// Tiny versions of each scenario, so that the benchmark code keeps working; numbers are not checked.
describe('bench scenarios (smoke)', () => {
  // One test, not two: the limit scenario reads the result file the batching run writes.
  it('batching: both configurations answer over every protocol, closed and open loop, paired with an in-process reference; then limit runs in-process at the sizes it formed', async () => {
    const result = await runBatching({
      model: SMOKE_MODEL,
      concurrencies: [1, 16],
      rates: [200],
      windows: SMOKE_WINDOWS,
      protocols: ['http-binary', 'http-json', 'grpc'],
      log,
      name: 'smoke-batching',
      referenceWindowMs: 50,
      h2load: { seconds: 0.3, warmUpSeconds: 0, rounds: 2 },
    });
    expect(result.points).toHaveLength(18);
    for (const p of result.points) {
      expect(p.client.errors, p.client.firstError).toBe(0);
      expect(p.client.throughput).toBeGreaterThan(0);
      expect(p.server.requests).toBeGreaterThan(0);
    }
    // The naive fastify + onnxruntime-node peer on the same file, at 16 clients (issue 44).
    expect(result.naive?.errors, result.naive?.firstError).toBe(0);
    expect(result.naive?.throughput).toBeGreaterThan(0);
    // And both again with h2load, where it is installed.
    const withH2load = await h2loadInstalled();
    if (withH2load) {
      // Two rounds, each batching on then the naive peer; the reported pair is one of them.
      expect(result.h2load!.rounds).toHaveLength(2);
      for (const r of result.h2load!.rounds.flatMap((round) => [round.on, round.naive])) {
        expect(r.errors).toBe(0);
        expect(r.perSecond).toBeGreaterThan(0);
      }
      expect(result.h2load!.rounds).toContainEqual({ on: result.h2load!.on, naive: result.h2load!.naive });
    } else expect(result.h2load).toBeUndefined();
    const open = result.points.filter((p) => p.rate === 200);
    expect(open).toHaveLength(6);
    for (const p of open) expect(p.client.load).toMatchObject({ rate: 200, arrivals: 'poisson' });
    for (const p of result.points.filter((p) => p.model === 'mlp_off')) expect(Object.keys(p.server.batches).map(Number)).toEqual([1]);
    expect(Object.keys(result.ratios).sort()).toEqual([
      'c1_p50_over_in_process',
      'c1_p50_over_in_process_grpc',
      'c1_p50_over_in_process_http_json',
      'p99_on_vs_off_c16',
      'p99_on_vs_off_c16_grpc',
      'p99_on_vs_off_c16_http_json',
      'server_vs_limit',
      'server_vs_limit_grpc',
      'server_vs_limit_http_json',
      'throughput_on_vs_naive_c16',
      ...(withH2load ? ['throughput_on_vs_naive_c16_h2load'] : []),
      'throughput_on_vs_off_c16',
      'throughput_on_vs_off_c16_grpc',
      'throughput_on_vs_off_c16_http_json',
    ]);
    // Batching on, at c=1 and at the top of the sweep, per protocol: a reference window before
    // (every size c clients can form) and after (the sizes formed) the server's measurement.
    expect(result.paired.map((p) => `${p.protocol} c=${p.concurrency}`)).toEqual([
      'http-binary c=1',
      'http-binary c=16',
      'http-json c=1',
      'http-json c=16',
      'grpc c=1',
      'grpc c=16',
    ]);
    for (const p of result.paired) {
      const point = result.points.find(
        (x) => x.model === 'mlp_on' && x.protocol === p.protocol && x.concurrency === p.concurrency && x.rate === undefined,
      )!;
      const formed = Object.keys(point.server.batches).map(Number);
      expect(p.windows.map((w) => w.runs.map((r) => r.batchSize))).toEqual(
        p.concurrency === 1 ? [[1], [1]] : [Array.from({ length: 16 }, (_, i) => i + 1), formed],
      );
      for (const w of p.windows) for (const r of w.runs) expect(r.runs).toBeGreaterThanOrEqual(3);
      expect(p.perWindow).toHaveLength(2);
      for (const v of p.perWindow) expect(v).toBeGreaterThan(0);
    }
    expect(result.ratios['c1_p50_over_in_process']).toBeGreaterThan(0);
    expect(result.ratios['server_vs_limit']).toBeGreaterThan(0);

    // limit: the table at the sizes formed; the ratios it reports are the paired ones.
    const { rows, comparison, paired } = await runLimit({
      model: SMOKE_MODEL,
      durationMs: 50,
      log,
      name: 'smoke-limit',
      batchingName: 'smoke-batching',
    });
    const formed = [...new Set(result.points.flatMap((p) => Object.keys(p.server.batches).map(Number)))].sort((a, b) => a - b);
    expect(rows.map((r) => r.batchSize)).toEqual(formed);
    expect(rows.every((r) => r.samplesPerSecond > 0)).toBe(true);
    expect(paired).toBe(true);
    expect(comparison['server_vs_limit']).toBe(result.ratios['server_vs_limit']);
    expect(comparison['c1_p50_over_in_process_grpc']).toBe(result.ratios['c1_p50_over_in_process_grpc']);

    // A batching result without paired ratios (from before they existed): limit compares with its own table.
    const unpairedRatios = Object.fromEntries(
      Object.entries(result.ratios).filter(([k]) => !k.startsWith('server_vs_limit') && !k.startsWith('c1_p50')),
    );
    await writeResult('smoke-batching-unpaired', { ...result, paired: undefined, ratios: unpairedRatios });
    const unpaired = await runLimit({
      model: SMOKE_MODEL,
      batchSizes: formed,
      durationMs: 20,
      log,
      name: 'smoke-limit-unpaired',
      batchingName: 'smoke-batching-unpaired',
    });
    expect(unpaired.paired).toBe(false);
    expect(unpaired.comparison['server_vs_limit']).toBeGreaterThan(0);
    expect(unpaired.comparison['c1_p50_over_in_process']).toBeGreaterThan(0);
  });

  it('the naive peer runs the identity through ONNX Runtime: its input back, and a shape the model refuses is refused', async () => {
    const naive = await startNaive(await tinyModelFile(log));
    const client = new HttpClient({ url: naive.url, connections: 1 });
    try {
      const request = fp32InferRequest('tiny', 16);
      const result = await client.infer(request);
      expect(result.outputs.map((o) => [o.name, o.datatype, o.shape])).toEqual([['OUTPUT0', 'FP32', [1, 16]]]);
      expect(Array.from(result.outputs[0]!.data as Float32Array)).toEqual(Array.from(request.inputs[0]!.data as Float32Array));
      // An echo would answer this; ONNX Runtime checks the shape against the model's [batch, 16].
      const narrow = fp32InferRequest('tiny', 8);
      await expect(client.infer(narrow)).rejects.toThrow();
    } finally {
      await client.close();
      naive.stop();
    }
  });

  it('overhead and gRPC: the echo, the ONNX and the JavaScript identity and the naive peer at 1 and 16 clients, then gRPC and lean gRPC, all answer; a check per target', async () => {
    const { measurements, grpc, ratios, checks } = await runOverhead({
      concurrencies: [1, 16],
      windows: QUICK_WINDOWS,
      protocols: ['grpc', 'grpc-raw'],
      mirrored: false,
      log,
      name: 'smoke-overhead',
    });
    expect(measurements.map((m) => `${m.target} c=${m.concurrency}`)).toEqual([
      'echo c=1',
      'onnx c=1',
      'js c=1',
      'naive c=1',
      'echo c=16',
      'onnx c=16',
      'js c=16',
      'naive c=16',
    ]);
    for (const m of measurements) {
      expect(m.reading.client.errors, m.reading.client.firstError).toBe(0);
      expect(m.reading.client.throughput).toBeGreaterThan(0);
      // /proc counts in 10 ms ticks: one short window of a starved server can read none.
      expect(m.reading.serverCpuMsPerAnswer).toBeGreaterThanOrEqual(0);
      if (m.target === 'onnx' || m.target === 'js') expect(m.reading.server!.requests).toBeGreaterThan(0);
    }
    expect(measurements.filter((m) => (m.reading.serverCpuMsPerAnswer ?? 0) > 0).length).toBeGreaterThan(measurements.length / 2);
    expect(grpc.map((g) => `${g.protocol} c=${g.concurrency}`)).toEqual(['grpc c=16', 'grpc-raw c=16']);
    // Each gRPC point on its own, so that a failure says which and why (one failed beside the full suite, once).
    for (const g of grpc) {
      expect(g.client.errors, `${g.protocol}: ${g.client.firstError}`).toBe(0);
      expect(g.client.throughput, g.protocol).toBeGreaterThan(0);
    }
    expect(ratios['grpc_vs_http_binary']).toBeGreaterThan(0);
    expect(ratios['grpc_raw_vs_http_binary']).toBeGreaterThan(0);
    expect(checks.map((c) => c.target)).toEqual([
      'p50_onnx_vs_echo_c1 <= 2',
      'server_cpu_onnx_vs_echo_c1 <= 2.5',
      'p50_js_vs_echo_c1 <= 2',
      'server_cpu_js_vs_echo_c1 <= 2.5',
      'server_cpu_onnx_vs_echo_c16 <= 1.3',
      'server_cpu_js_vs_echo_c16 <= 1.3',
      'throughput_onnx_vs_naive_c16 >= 1.2',
    ]);
    // The naive peer has its ratios too; their values may be 0 or NaN here, its two short windows reading no /proc tick (above).
    expect(typeof ratios['server_cpu_naive_vs_echo_c16']).toBe('number');
    expect(await readFile(`${RESULTS_DIR}smoke-overhead.md`, 'utf8')).toMatch(/\*\*(PASS|MISS)\*\* throughput_onnx_vs_naive_c16 >= 1\.2: /);
  });

  it('grpc: h2load against the server and a bare grpc-js server at every load, wrk over HTTP beside them; a check per target (skipped without h2load and wrk)', async () => {
    const { rows, checks, ratios } = await runGrpc({ seconds: 0.3, rounds: 1, warmUpSeconds: 0, log, name: 'smoke-grpc' });
    if (!(await h2loadInstalled()) || !(await wrkInstalled())) {
      expect(rows).toEqual([]);
      return;
    }
    expect(rows.map((r) => `${r.target} ${r.protocol} ${r.load}`).sort()).toEqual(
      [
        ...['peer', 'onnx', 'js'].flatMap((t) => ['16x1', '1x16', '1x1'].map((l) => `${t} grpc ${l}`)),
        'onnx http-binary 16',
        'js http-binary 16',
        // Node's transports alone, the one-channel comparison's ceiling.
        'bare grpc 1x16',
        'bare http-binary 16',
      ].sort(),
    );
    for (const r of rows) {
      expect(r.errors, `${r.target} ${r.load}`).toBe(0);
      expect(r.perSecond).toBeGreaterThan(0);
    }
    expect(checks.map((c) => c.target)).toHaveLength(8);
    expect(ratios['bare_transport_1x16_vs_http_16']).toBeGreaterThan(0);
  });

  it('efficiency: the server and the same model in-process on its batches, rows per second and per CPU-second, the server by thread group', async () => {
    const result = await runEfficiency({
      model: SMOKE_MODEL,
      concurrency: 16,
      windows: QUICK_WINDOWS,
      inProcessMs: 50,
      log,
      name: 'smoke-efficiency',
    });
    expect(result.points.map((p) => p.kind)).toEqual(['server', 'in-process', 'in-process', 'server']);
    for (const p of result.points) {
      if (p.kind === 'server') {
        expect(p.reading.client.errors, p.reading.client.firstError).toBe(0);
        expect(p.rowsPerCpuSecond).toBeGreaterThan(0);
        // Linux: the server's threads told apart, one worker for the one instance.
        expect(p.reading.threads?.workers.threads).toBe(1);
        expect(p.reading.threads?.main.threads).toBe(1);
      } else {
        expect(p.window.rowsPerCpuSecond).toBeGreaterThan(0);
      }
    }
    expect(result.checks.map((c) => c.target)).toEqual([
      'rows_per_cpu_second_vs_in_process >= 0.8',
      'rows_per_second_vs_in_process >= 0.6',
    ]);
    expect(result.config).toContain('intra_op_thread_count');
  });

  it('objective-curve: the objective from the one-client p50, then static and each twin at 64 connections; both checks and the frontier', async () => {
    const result = await runObjectiveCurve({
      model: SMOKE_MODEL,
      // Half a second of warm-up: on a loaded runner 64 connections' first answers took longer than a 0.3 s measurement.
      seconds: 0.5,
      rounds: 1,
      factors: [0.8, 1],
      warmUpSeconds: 0.5,
      log,
      name: 'smoke-objective-curve',
    });
    if (!('objectiveMs' in result)) {
      // Without h2load nothing is measured.
      expect(await h2loadInstalled()).toBe(false);
      expect(result.points).toEqual([]);
      return;
    }
    expect(result.points.map((p) => p.model)).toEqual(['static', 'objective_0', 'objective_1']);
    expect(result.points[2]!.objectiveMs).toBe(result.objectiveMs);
    for (const p of result.points) {
      expect(p.rounds).toHaveLength(1);
      expect(p.rounds[0]!.perSecond, p.model).toBeGreaterThan(0);
      expect(Object.keys(p.rounds[0]!.statusPerSecond).every((s) => s === '200' || s === '503')).toBe(true);
    }
    expect(result.points[0]!.rounds[0]!.statusPerSecond[503] ?? 0).toBe(0);
    expect(result.checks.map((c) => c.target)).toEqual(['ok_per_second_objective_vs_static_c64 >= 0.8', 'p99_over_objective_c64 <= 1.25']);
    expect(await readFile(`${RESULTS_DIR}smoke-objective-curve.md`, 'utf8')).toMatch(
      /^- (the most 200s per second of a twin whose p99 is|no twin kept its p99) within 1\.25x its objective/m,
    );
  });

  it('objective-overload: both twins closed and open loop, 200s and 503s per second, the objective at 4x the one-client p50; a check per load', async () => {
    const result = await runObjectiveOverload({
      model: SMOKE_MODEL,
      concurrencies: [4, 64],
      windows: QUICK_WINDOWS,
      log,
      name: 'smoke-objective-overload',
    });
    expect(result.objectiveMs).toBeCloseTo(Math.max(0.1, result.oneClientP50Ms * 4), 1);
    expect(result.configs.objective).toContain(`batchwise_latency_objective_ms" value: { string_value: "${result.objectiveMs}" }`);
    expect(result.configs.static).toContain('dynamic_batching { }');
    expect(result.rows.map((r) => `${r.model} ${r.load.replace(/\d+\/s/, 'N/s')}`)).toEqual([
      'static c=4',
      'objective c=4',
      'objective c=64',
      'static c=64',
      'static c=64',
      'objective c=64',
      'static open N/s',
      'objective open N/s',
    ]);
    for (const r of result.rows) {
      const statuses = Object.keys(r.reading.statusPerSecond).map(Number);
      expect(
        statuses.every((s) => s === 200 || s === 503),
        `${r.model} ${r.load}: ${statuses}`,
      ).toBe(true);
      if (r.model === 'static') expect(r.reading.statusPerSecond[503] ?? 0).toBe(0);
      expect(r.reading.clientCores).toBeGreaterThanOrEqual(0);
      expect(r.reading.serverCores).toBeGreaterThanOrEqual(0);
    }
    // /proc counts in 10 ms ticks: a 100 ms window on a loaded CI can read none for one process (a clean-clone
    // run saw a server row at 0), never for every row.
    expect(result.rows.some((r) => r.reading.clientCores > 0)).toBe(true);
    expect(result.rows.some((r) => (r.reading.serverCores ?? 0) > 0)).toBe(true);
    expect(result.checks.map((c) => c.target)).toEqual([
      'ok_per_second_objective_vs_static_c4 >= 0.95',
      'ok_per_second_objective_vs_static_c64 >= 0.8',
      'p99_over_objective_c64 <= 1.25',
      'ok_per_second_objective_vs_static_open >= 0.95',
    ]);
  });

  it('tracing: off, OpenTelemetry at rate 1000 and at rate 1 all answer; every request traced reaches the receiver', async () => {
    // Each configuration once: the mirrored order of the full run only evens out drift in timings.
    const { measurements, ratios } = await runTracing({
      concurrency: 2,
      windows: SMOKE_WINDOWS,
      log,
      name: 'smoke-tracing',
      mirrored: false,
    });
    const labels = ['tracing off', 'opentelemetry rate=1000', 'opentelemetry rate=1'];
    expect(measurements.map((m) => m.result.label)).toEqual(labels);
    for (const { result } of measurements) {
      expect(result.errors, `${result.label}: ${result.firstError}`).toBe(0);
      expect(result.throughput, result.label).toBeGreaterThan(0);
    }
    const spans = (label: string) => measurements.filter((m) => m.result.label === label).map((m) => m.spans);
    expect(spans('tracing off')).toEqual([0]);
    // A request span and four phase spans per traced request (fewer only if the span queue overflowed).
    for (const n of spans('opentelemetry rate=1')) expect(n).toBeGreaterThan(0);
    expect(ratios['throughput_every_vs_off']).toBeGreaterThan(0);
    expect(Object.keys(ratios)).toHaveLength(6);
  });

  it('many-elements: every request answered (served or refused), the other client unharmed, peak RSS read', async () => {
    const result = await runManyElements({ elements: 200_000, memoryLimit: '1G', log, name: 'smoke-many-elements' });
    expect(result.requests).toHaveLength(7);
    for (const r of result.requests) expect(r.code, r.message).toBeDefined();
    expect(result.bystander.failed).toBe(0);
    expect(result.bystander.notReady).toBe(0);
    expect(result.peakRssBytes).toBeGreaterThan(0);
  });

  it('ensemble: the pipeline as an ensemble and chained by the client, the tiny model direct and in a one-step ensemble, all answer; every target ratio computed', async () => {
    const result = await runEnsemble({ concurrencies: [1, 16], tinyConcurrency: 16, windows: SMOKE_WINDOWS, log, name: 'smoke-ensemble' });
    expect(result.points.map((p) => `${p.variant} c=${p.concurrency}`)).toEqual([
      'ensemble c=1',
      'client-chained c=1',
      'client-chained c=1',
      'ensemble c=1',
      'ensemble c=16',
      'client-chained c=16',
      'client-chained c=16',
      'ensemble c=16',
      'direct c=16',
      'one-step ensemble c=16',
      'one-step ensemble c=16',
      'direct c=16',
    ]);
    for (const p of result.points) {
      expect(p.client.errors, p.client.firstError).toBe(0);
      expect(p.client.throughput).toBeGreaterThan(0);
    }
    // The ensemble's requests reach every step through the server; the chained ones reach them one by one.
    for (const p of result.points.filter((x) => x.variant === 'ensemble' || x.variant === 'client-chained')) {
      for (const step of ['tokenizer', 'encoder', 'classifier', 'postprocess']) expect(p.server[step]!.requests).toBeGreaterThan(0);
      expect(p.server['text_classification']!.requests > 0).toBe(p.variant === 'ensemble');
    }
    expect(Object.keys(result.ratios).sort()).toEqual(Object.keys(TARGETS).sort());
    for (const v of Object.values(result.ratios)) expect(v).toBeGreaterThan(0);
    expect(result.oneStepServerCpuDirectOverEnsemble).toBeGreaterThan(0);
  });

  it('rate-limit: both models served through one resource of count 1, never two executions at once; shares computed', async () => {
    const result = await runRateLimit({ concurrency: 2, durationMs: 600, holdMs: 2, log, name: 'smoke-rate-limit' });
    expect(result.errors).toBe(0);
    expect(result.executions['high']).toBeGreaterThan(0);
    expect(result.executions['low']).toBeGreaterThan(0);
    expect(result.maxConcurrent).toBe(1);
    expect(result.highShare).toBeGreaterThan(0);
    // The sweep itself: an end at the instant of the next start is no overlap.
    expect(
      maxConcurrent([
        { start: 0, end: 2 },
        { start: 2, end: 3 },
        { start: 2.5, end: 4 },
      ]),
    ).toBe(2);
  });

  it('many-models: on demand under the limit, all loaded and naive unloads all answer every request; loads, hits and evictions counted', async () => {
    const runs = await runManyModels({ models: 6, width: 64, clients: 4, durationMs: 800, log, name: 'smoke-many-models' });
    expect(runs.map((r) => r.config)).toEqual(['on-demand', 'all-loaded', 'naive-unload']);
    for (const r of runs) expect(r.failed, `${r.config}: ${r.firstFailure}`).toBe(0);
    expect(runs[0]!.loads).toBeGreaterThan(0);
    expect(runs[1]!.hitRate).toBe(1);
    expect(runs[0]!.peakModelMemoryBytes).toBeLessThanOrEqual(runs[0]!.modelMemoryLimitBytes!);
  });

  it('sequences: direct and oldest each answer every step of every sequence, batched', async () => {
    const runs = await runSequences({ clients: 4, steps: 3, rounds: 1, width: 16, log, name: 'smoke-sequences' });
    expect(runs.map((r) => r.strategy)).toEqual(['direct', 'oldest', 'oldest', 'direct']);
    for (const r of runs) {
      expect(r.errors, `${r.strategy}: ${r.firstError}`).toBe(0);
      expect(r.server.requests).toBe(12);
    }
  });

  it('streaming: 1 and 4 generate_stream clients of the single model and of the ensemble each get every token of every stream, and next_token and the detokenizer count their batches', async () => {
    const result = await runStreaming({ concurrencies: [1, 4], tokens: 8, durationMs: 300, log, name: 'smoke-streaming' });
    const order = ['single 1', 'ensemble 1', 'single 4', 'ensemble 4'];
    expect(result.points.map((p) => `${p.form} ${p.concurrency}`)).toEqual([...order, ...[...order].reverse()]);
    for (const p of result.points) {
      expect(p.errors, p.firstError).toBe(0);
      expect(p.tokens).toBe(p.streams * 8);
      expect(p.nextToken.avgBatchSize).toBeGreaterThanOrEqual(1);
      if (p.form === 'ensemble') expect(p.detokenizer!.requests).toBe(p.tokens);
    }
    expect(result.ratio).toBeGreaterThan(0);
    expect(result.ensembleRatio).toBeGreaterThan(0);
  });

  it('handoff: each transport makes its round trips to a worker thread and back, timed', async () => {
    const rows = await runHandoff({ roundTrips: 200, rounds: 1, log, name: 'smoke-handoff' });
    expect(rows.map((r) => r.transport)).toEqual(['futex', 'blockedWorker', 'waitAsync', 'postMessage']);
    for (const row of rows) {
      expect(row.wallUs).toBeGreaterThan(0);
      expect(row.cpuUs).toBeGreaterThan(0);
    }
  });

  it('adaptive: three servers through quiet, steady and burst phases, with a check per target and a markdown report', async () => {
    const result = await runAdaptive({ model: SMOKE_MODEL, phaseMs: 300, windows: SMOKE_WINDOWS, log, name: 'smoke-adaptive' });
    expect(result.objectiveMs).toBeGreaterThan(0);
    expect(result.configs.objective).toContain(`batchwise_latency_objective_ms" value: { string_value: "${result.objectiveMs}" }`);
    expect(result.staticSource).toMatch(/no --static-config/);
    for (const server of ['default', 'static', 'objective'] as const) {
      for (const phase of ['quiet', 'steady', 'burst'] as const) {
        const r = result.results[server][phase];
        expect(r.sent, `${server} ${phase}`).toBeGreaterThan(0);
        expect(r.otherFailures, `${server} ${phase}`).toBe(0);
        expect(r.server.requests, `${server} ${phase}: the server's own count`).toBeGreaterThan(0);
        expect(r.server.avgRequestMs, `${server} ${phase}`).toBeGreaterThan(0);
        if (server !== 'objective') expect(r.shed).toBe(0);
      }
    }
    expect(result.checks).toHaveLength(6);
    const report = await readFile(`${RESULTS_DIR}smoke-adaptive.md`, 'utf8');
    expect(report).toMatch(/^# pnpm bench adaptive/);
    expect(report).toMatch(/\*\*(PASS|MISS)\*\* objective: burst goodput above both static configs/);
  }, 180_000); // four server processes start one after another
});
