import { describe, expect, it } from 'vitest';
import { EMF_MAX_VALUES_PER_METRIC, EMF_METRICS } from './emf-metrics.ts';
import { EmfWriter, EMF_NAMESPACE, distributionAtUpperBounds, distributionFromCumulativeBuckets } from './emf-writer.ts';
import type { EmfDistribution } from './emf-writer.ts';
import { ServerMetrics } from './server-metrics.ts';
import { VersionStatistics } from './version-statistics.ts';

type Line = Record<string, any>;
const declared = (line: Line): Array<{ Name: string; Unit: string }> => line._aws.CloudWatchMetrics[0].Metrics;

/** Nearest-rank percentile of an EMF distribution, as CloudWatch computes it from its values. */
function percentile(d: EmfDistribution, p: number): number {
  const pairs = d.Values.map((v, i) => [v, d.Counts[i]!] as const).sort((a, b) => a[0] - b[0]);
  const total = d.Counts.reduce((a, b) => a + b, 0);
  let seen = 0;
  for (const [value, count] of pairs) if ((seen += count) >= Math.ceil(p * total)) return value;
  return NaN;
}

function setup() {
  const metrics = new ServerMetrics({ processMetrics: false });
  const stats = new VersionStatistics('simple', '1', metrics);
  const lines: Line[] = [];
  const writer = new EmfWriter(metrics, { serviceName: 'batchwise-prod', write: (l) => lines.push(JSON.parse(l)) });
  return { metrics, stats, lines, writer };
}

describe('CloudWatch embedded metric format', () => {
  it('carries loads, evictions, their times and what is loaded on the service line, per interval (issue 27)', async () => {
    const { metrics, lines, writer } = setup();
    metrics.observeResidency(() => ({
      modelsLoaded: 3,
      hostBytes: 300,
      hostLimitBytes: 400,
      gpuBytes: new Map([
        [0, 10],
        [1, 30],
      ]),
      gpuLimitBytes: undefined,
      cacheBytes: 900,
      cacheLimitBytes: 1000,
      cacheDeletions: 2,
    }));
    metrics.modelLoads.inc(4);
    metrics.modelEvictions.inc(2);
    metrics.modelLoadDurationByPhase.observe({ phase: 'session' }, 0.3);
    metrics.loadWaitSeconds.observe(0.2);
    metrics.loadWaitSeconds.observe(0.4);
    await writer.flush(1);
    metrics.modelEvictions.inc();
    await writer.flush(2);
    const [first, second] = lines.filter((l) => l.Model === undefined);
    expect(first).toMatchObject({
      ModelLoads: 4,
      ModelEvictions: 2,
      ModelsLoaded: 3,
      ModelMemoryBytes: 300,
      ModelMemoryLimitBytes: 400,
      ModelGpuMemoryBytes: 30,
      ModelCacheBytes: 900,
    });
    expect(first!.LoadWaitTime.Counts.reduce((a: number, b: number) => a + b, 0)).toBe(2);
    expect(first!.ModelSessionTime.Counts).toEqual([1]);
    expect(first!.ModelDownloadTime).toBeUndefined();
    expect(second).toMatchObject({ ModelLoads: 0, ModelEvictions: 1 });
    expect(second!.LoadWaitTime).toBeUndefined();
    for (const { Name, Unit } of declared(first!)) expect(Object.values(EMF_METRICS).find((m) => m.name === Name)?.unit).toBe(Unit);
  });

  it('writes one line per model and one for the service, with deltas per interval', async () => {
    const { metrics, stats, lines, writer } = setup();
    metrics.memoryBudgetBytes.set(1000);
    // 300 ms ago: the test's own time to reach recordSuccess (milliseconds on a loaded CI) stays inside the bucket.
    const request = { batchSize: 1, arrivalNs: process.hrtime.bigint() - 300_000_000n };
    const timings = { computeInputNs: 1, computeInferNs: 1, computeOutputNs: 1 };
    stats.recordSuccess(request, 700_000, timings);
    stats.recordSuccess(request, 700_000, timings);
    stats.recordExecution(2, { computeInputNs: 0, computeInferNs: 1_500_000, computeOutputNs: 0 });
    stats.recordFailure(request, 'REJECTED');
    stats.recordFailure(request, 'BACKEND');
    stats.recordFailure(request, 'OTHER');
    stats.setPending(4);
    await writer.flush(1_700_000_000_000);

    const perModel = lines.find((p) => p.Model === 'simple')!;
    const service = lines.find((p) => p.Model === undefined)!;
    expect(perModel._aws).toMatchObject({
      Timestamp: 1_700_000_000_000,
      CloudWatchMetrics: [{ Namespace: EMF_NAMESPACE, Dimensions: [['ServiceName', 'Model']] }],
    });
    expect(perModel).toMatchObject({
      ServiceName: 'batchwise-prod',
      RequestCount: 5,
      RequestFailures: 3,
      BackendFailures: 1,
      QueueRejections: 1,
      PendingRequests: 4,
    });
    // Two successful requests of about 300 ms (failures have no latency): in the (250 ms, 500 ms] bucket, spread inside it.
    expect(perModel.RequestLatency.Counts.reduce((a: number, b: number) => a + b, 0)).toBe(2);
    for (const v of perModel.RequestLatency.Values) {
      expect(v).toBeGreaterThan(250);
      expect(v).toBeLessThan(500);
    }
    // Queue 0.7 ms: the (0.5 ms, 1 ms] bucket; one batch of 2 that computed 1.5 ms.
    expect(perModel.QueueLatency.Counts.reduce((a: number, b: number) => a + b, 0)).toBe(2);
    for (const v of perModel.QueueLatency.Values) expect(v > 0.5 && v < 1).toBe(true);
    expect(perModel.ComputeLatency.Counts).toEqual([1]);
    expect(perModel.ComputeLatency.Values[0]).toBeGreaterThan(1);
    expect(perModel.ComputeLatency.Values[0]).toBeLessThan(2.5);
    expect(perModel.BatchSize).toEqual({ Values: [2], Counts: [1] });
    expect(service._aws.CloudWatchMetrics[0].Dimensions).toEqual([['ServiceName']]);
    expect(service).toMatchObject({ RequestCount: 5, BackendFailures: 1, MemoryBudgetBytes: 1000 });
    expect(service.RequestLatency).toEqual(perModel.RequestLatency);
    for (const line of [perModel, service]) {
      for (const { Name, Unit } of declared(line)) {
        expect(Object.values(EMF_METRICS).find((m) => m.name === Name)?.unit).toBe(Unit);
        expect(line[Name]).toBeDefined();
      }
    }

    lines.length = 0;
    stats.recordSuccess(request, 0, timings);
    await writer.flush();
    expect(lines.find((l) => l.Model)!.RequestCount).toBe(1);
    expect(lines.find((l) => l.Model)!.RequestLatency.Counts).toEqual([1]);
  });

  it('writes every metric of the contract, GpuMemoryUsedBytes when a GPU reading exists', async () => {
    const { metrics, stats, lines, writer } = setup();
    metrics.memoryBudgetBytes.set(1000);
    metrics.memoryAccountedBytes.set(10);
    stats.recordSuccess({ batchSize: 1, arrivalNs: process.hrtime.bigint() }, 0, {
      computeInputNs: 1,
      computeInferNs: 1,
      computeOutputNs: 1,
    });
    await writer.flush();
    const service = () => lines.find((l) => l.Model === undefined)!;
    expect(service().GpuMemoryUsedBytes).toBeUndefined();
    expect(declared(service()).map((m) => m.Name)).not.toContain('GpuMemoryUsedBytes');

    lines.length = 0;
    metrics.gpuMemoryUsedBytes.labels({ gpu_uuid: 'GPU-a' }).set(3 * 1024 ** 3);
    metrics.gpuMemoryUsedBytes.labels({ gpu_uuid: 'GPU-b' }).set(1024 ** 3);
    metrics.gpuUtilization.labels({ gpu_uuid: 'GPU-a' }).set(0.5);
    metrics.gpuUtilization.labels({ gpu_uuid: 'GPU-b' }).set(0.25);
    // Loads, waits, a memory limit, a GPU and a cache with a limit: the many-models metrics are all there.
    metrics.observeResidency(() => ({
      modelsLoaded: 1,
      hostBytes: 1,
      hostLimitBytes: 2,
      gpuBytes: new Map([[0, 1]]),
      gpuLimitBytes: 2,
      cacheBytes: 1,
      cacheLimitBytes: 2,
      cacheDeletions: 0,
    }));
    for (const phase of ['download', 'session']) metrics.modelLoadDurationByPhase.observe({ phase }, 0.1);
    metrics.loadWaitSeconds.observe(0.1);
    // A version with a sequence batcher: the sequence metrics are there.
    stats.observeSequences(() => ({ active: 1, backlog: 0, slotsInUse: 1, slots: 8, idleReleases: 0, stateBytes: 12 }));
    stats.recordExecution(1, { computeInputNs: 1, computeInferNs: 1, computeOutputNs: 1 });
    stats.recordSuccess({ batchSize: 1, arrivalNs: process.hrtime.bigint() }, 0, {
      computeInputNs: 1,
      computeInferNs: 1,
      computeOutputNs: 1,
    });
    await writer.flush();
    expect(service().GpuMemoryUsedBytes).toBe(4 * 1024 ** 3);
    expect(declared(service())).toContainEqual({ Name: 'GpuMemoryUsedBytes', Unit: 'Bytes' });
    expect(service().GpuUtilization).toBe(37.5);
    expect(declared(service())).toContainEqual({ Name: 'GpuUtilization', Unit: 'Percent' });
    expect(
      declared(service())
        .map((m) => m.Name)
        .sort(),
    ).toEqual(
      Object.values(EMF_METRICS)
        .map((m) => m.name)
        .sort(),
    );
  });

  it("counts models whose load failed: 1 on the model's line (even one that never loaded), their number on the service line", async () => {
    const { metrics, stats, lines, writer } = setup();
    stats.setPending(0);
    metrics.modelLoadFailed.labels({ model: 'simple' }).set(0);
    metrics.modelLoadFailed.labels({ model: 'broken' }).set(1);
    metrics.modelLoadFailed.labels({ model: 'bad_config' }).set(1);
    await writer.flush();
    const line = (model?: string) => lines.find((l) => l.Model === model)!;
    expect(line('simple').ModelsFailedToLoad).toBe(0);
    expect(line('broken')).toMatchObject({ ModelsFailedToLoad: 1, RequestCount: 0 });
    expect(line(undefined).ModelsFailedToLoad).toBe(2);
    expect(declared(line(undefined))).toContainEqual({ Name: 'ModelsFailedToLoad', Unit: 'Count' });

    // A gauge, not a delta: still failed in the next interval.
    lines.length = 0;
    metrics.modelLoadFailed.labels({ model: 'bad_config' }).set(0);
    await writer.flush();
    expect(line(undefined).ModelsFailedToLoad).toBe(1);
  });

  it('writes the sequence gauges on the lines of models with a sequence batcher and their sum on the service line (issue 28)', async () => {
    const { metrics, stats, lines, writer } = setup();
    stats.setPending(0);
    const figures = { active: 10, backlog: 2, slotsInUse: 8, slots: 8, idleReleases: 3, stateBytes: 96 };
    stats.observeSequences(() => figures);
    new VersionStatistics('streamer', '2', metrics).observeSequences(() => ({ ...figures, active: 1, backlog: 0 }));
    new VersionStatistics('plain', '1', metrics).setPending(1);
    await writer.flush();
    const line = (model?: string) => lines.find((l) => l.Model === model)!;
    expect(line('simple')).toMatchObject({ SequencesActive: 10, SequenceBacklog: 2 });
    expect(line('streamer')).toMatchObject({ SequencesActive: 1, SequenceBacklog: 0 });
    expect(line(undefined)).toMatchObject({ SequencesActive: 11, SequenceBacklog: 2 });
    expect(declared(line(undefined))).toContainEqual({ Name: 'SequencesActive', Unit: 'Count' });
    expect(declared(line(undefined))).toContainEqual({ Name: 'SequenceBacklog', Unit: 'Count' });
    // A model without sequence_batching carries none.
    expect(line('plain').SequencesActive).toBeUndefined();
    expect(declared(line('plain')).map((m) => m.Name)).not.toContain('SequencesActive');

    // Gauges, not deltas: the next interval has the same.
    lines.length = 0;
    await writer.flush();
    expect(line('simple')).toMatchObject({ SequencesActive: 10, SequenceBacklog: 2 });
  });

  it('writes canary rollbacks per interval, on the model line and the service line', async () => {
    const { metrics, lines, writer } = setup();
    await writer.flush();
    metrics.canaryRollbacks.labels({ model: 'simple', reason: 'error_rate' }).inc();
    lines.length = 0;
    await writer.flush();
    const line = (model?: string) => lines.find((l) => l.Model === model)!;
    expect(line('simple').CanaryRollbacks).toBe(1);
    expect(line(undefined).CanaryRollbacks).toBe(1);
    expect(declared(line(undefined))).toContainEqual({ Name: 'CanaryRollbacks', Unit: 'Count' });
    // A counter: the next interval has none.
    lines.length = 0;
    await writer.flush();
    expect(line('simple').CanaryRollbacks).toBe(0);
  });

  it('turns cumulative buckets into a distribution whose p99 lies inside the p99 bucket, not at its edge', () => {
    // 990 requests at <= 1 ms, 10 in (250 ms, 500 ms]: the bucket-edge method said 500 ms.
    const buckets = new Map([
      [0.001, 990],
      [0.25, 990],
      [0.5, 1000],
      [1, 1000],
      [Infinity, 1000],
    ]);
    const d = distributionFromCumulativeBuckets(buckets, 1000)!;
    expect(d.Counts.reduce((a, b) => a + b, 0)).toBe(1000);
    expect(d.Counts.every((c) => Number.isInteger(c) && c > 0)).toBe(true);
    expect(percentile(d, 0.5)).toBeLessThanOrEqual(1);
    expect(percentile(d, 0.99)).toBeLessThan(500);
    expect(percentile(d, 0.995)).toBeGreaterThan(250);
    expect(percentile(d, 0.995)).toBeLessThan(500);
    expect(percentile(d, 1)).toBeLessThan(500);
  });

  it('counts batch sizes at their bucket upper bounds, overflow at the last finite bound', () => {
    const buckets = new Map([
      [1, 5],
      [2, 5],
      [4, 8],
      [8, 8],
      [Infinity, 9],
    ]);
    expect(distributionAtUpperBounds(buckets)).toEqual({ Values: [1, 4, 8], Counts: [5, 3, 1] });
    expect(distributionAtUpperBounds(new Map([[1, 0]]))).toBeUndefined();
  });

  it('keeps within the EMF limit of values and counts overflow at the last finite bound', () => {
    const bounds = Array.from({ length: 40 }, (_, i) => (i + 1) / 100);
    const buckets = new Map<number, number>(bounds.map((b, i) => [b, (i + 1) * 1000]));
    buckets.set(Infinity, 40_000 + 7);
    const d = distributionFromCumulativeBuckets(buckets)!;
    expect(d.Values.length).toBeLessThanOrEqual(EMF_MAX_VALUES_PER_METRIC);
    expect(d.Values.length).toBe(d.Counts.length);
    expect(d.Counts.reduce((a, b) => a + b, 0)).toBe(40_007);
    expect(d.Values.at(-1)).toBe(0.4);
    expect(d.Counts.at(-1)).toBe(7);
    expect(
      distributionFromCumulativeBuckets(
        new Map([
          [0.1, 0],
          [Infinity, 0],
        ]),
      ),
    ).toBeUndefined();
  });
});
