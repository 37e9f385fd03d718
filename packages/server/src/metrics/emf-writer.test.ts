import { describe, expect, it } from 'vitest';
import { EmfWriter, EMF_NAMESPACE, quantileFromCumulativeBuckets } from './emf-writer.ts';
import { ServerMetrics } from './server-metrics.ts';
import { VersionStatistics } from './version-statistics.ts';

// The names the infrastructure's alarms, dashboard and autoscaling read (infra/lib/server-metrics.ts).
const CONTRACT = ['RequestCount', 'RequestFailures', 'QueueRejections', 'MemoryRejections', 'PendingRequests', 'RequestLatencyP99'];

describe('CloudWatch embedded metric format', () => {
  it('writes one line per model and one for the service, with deltas per interval', async () => {
    const metrics = new ServerMetrics({ processMetrics: false });
    metrics.memoryBudgetBytes.set(1000);
    const stats = new VersionStatistics('simple', '1', metrics);
    const lines: string[] = [];
    const writer = new EmfWriter(metrics, { serviceName: 'batchwise-prod', write: (l) => lines.push(l) });
    const request = { batchSize: 1, arrivalNs: process.hrtime.bigint() - 3_000_000n };
    const timings = { computeInputNs: 1, computeInferNs: 1, computeOutputNs: 1 };
    stats.recordSuccess(request, 0, timings);
    stats.recordSuccess(request, 0, timings);
    stats.recordFailure(request, 'REJECTED');
    stats.setPending(4);
    await writer.flush(1_700_000_000_000);

    const parsed = lines.map((l) => JSON.parse(l));
    const perModel = parsed.find((p) => p.Model === 'simple');
    const service = parsed.find((p) => p.Model === undefined);
    expect(perModel._aws).toMatchObject({
      Timestamp: 1_700_000_000_000,
      CloudWatchMetrics: [{ Namespace: EMF_NAMESPACE, Dimensions: [['ServiceName', 'Model']] }],
    });
    expect(perModel).toMatchObject({ ServiceName: 'batchwise-prod', RequestCount: 3, RequestFailures: 1, QueueRejections: 1, PendingRequests: 4 });
    expect(perModel.RequestLatencyP99).toBeGreaterThanOrEqual(2.5);
    expect(perModel.RequestLatencyP99).toBeLessThanOrEqual(25);
    expect(service._aws.CloudWatchMetrics[0].Dimensions).toEqual([['ServiceName']]);
    expect(service).toMatchObject({ RequestCount: 3, MemoryBudgetBytes: 1000 });
    const declared = perModel._aws.CloudWatchMetrics[0].Metrics.map((m: { Name: string }) => m.Name);
    for (const name of CONTRACT) expect(declared).toContain(name);
    expect(perModel._aws.CloudWatchMetrics[0].Metrics.find((m: { Name: string }) => m.Name === 'RequestLatencyP99').Unit).toBe('Milliseconds');

    lines.length = 0;
    stats.recordSuccess(request, 0, timings);
    await writer.flush();
    expect(JSON.parse(lines.find((l) => l.includes('"Model"'))!).RequestCount).toBe(1);
  });

  it('takes quantiles from cumulative buckets', () => {
    const buckets = new Map([[0.001, 50], [0.01, 98], [0.1, 100], [Infinity, 100]]);
    expect(quantileFromCumulativeBuckets(buckets, 0.5)).toBe(0.001);
    expect(quantileFromCumulativeBuckets(buckets, 0.99)).toBe(0.1);
    expect(quantileFromCumulativeBuckets(new Map(), 0.99)).toBeUndefined();
  });
});
