import { describe, expect, it } from 'vitest';
import { isStable, latencyThroughputSvg, measure, percentile, sleep, summarize, type WindowOptions } from '@batchwise/client/load';
import { breakdown } from '../src/server-stats.ts';

const windows: WindowOptions = { warmupMs: 50, windowMs: 150, minWindows: 2, maxWindows: 3, tolerance: 0.5 };

describe('load generator', () => {
  it('closed loop keeps `concurrency` requests outstanding and reads hooks around the windows', async () => {
    let outstanding = 0;
    let peak = 0;
    const events: string[] = [];
    const send = async () => {
      peak = Math.max(peak, ++outstanding);
      await sleep(5);
      outstanding--;
    };
    const result = await measure('fake', send, { concurrency: 4 }, windows, {
      onMeasureStart: async () => void events.push('start'),
      onMeasureEnd: async () => void events.push('end'),
    });
    expect(peak).toBe(4);
    expect(events).toEqual(['start', 'end']);
    // However slow this machine is today, a closed loop obeys Little's law: 4 outstanding =
    // throughput x mean latency (a little less: the gap between one request and the next).
    const outstandingOnAverage = result.throughput * (result.latencyMs.mean / 1000);
    expect(outstandingOnAverage).toBeGreaterThan(3);
    expect(outstandingOnAverage).toBeLessThanOrEqual(4.4);
    // Each request sleeps 5 ms (Node timers may fire up to 1 ms early): at most 4 / 4 ms.
    expect(result.latencyMs.p50).toBeGreaterThanOrEqual(4);
    expect(result.throughput).toBeLessThanOrEqual(1000);
    expect(result.windows.length).toBeGreaterThanOrEqual(2);
    expect(result.errors).toBe(0);
  });

  it('counts failures apart from successes', async () => {
    let n = 0;
    const result = await measure(
      'flaky',
      async () => {
        await sleep(2);
        if (++n % 2 === 0) throw new Error('boom');
      },
      { concurrency: 2 },
      windows,
    );
    expect(result.errors).toBeGreaterThan(0);
    expect(result.firstError).toBe('boom');
    expect(result.requests).toBeGreaterThan(result.errors);
  });

  it('open loop offers the rate whatever the latency, with constant or Poisson arrivals', async () => {
    for (const arrivals of ['constant', 'poisson'] as const) {
      const result = await measure('open', () => sleep(20), { rate: 400, arrivals }, { ...windows, windowMs: 300 });
      // 400/s offered with 20 ms latency: throughput follows the offered rate, not the
      // latency (a closed loop of 8 would do the same only by chance). Late timers on a busy
      // machine are caught up by sending what is due, so only arrival noise remains.
      expect(result.throughput).toBeGreaterThan(200);
      expect(result.throughput).toBeLessThan(600);
      expect(result.notSent).toBe(0);
    }
  });

  it('open loop never exceeds its outstanding bound and counts what it could not send', async () => {
    let outstanding = 0;
    let peak = 0;
    const result = await measure(
      'bounded',
      async () => {
        peak = Math.max(peak, ++outstanding);
        await sleep(50);
        outstanding--;
      },
      { rate: 500, maxOutstanding: 3, arrivals: 'constant' },
      windows,
    );
    expect(peak).toBeLessThanOrEqual(3);
    expect(result.notSent).toBeGreaterThan(0);
  });
});

describe('statistics and plot', () => {
  it('percentiles by nearest rank', () => {
    const sorted = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(sorted, 50)).toBe(50);
    expect(percentile(sorted, 99)).toBe(99);
    expect(summarize([3, 1, 2]).p50).toBe(2);
    expect(isStable([100, 104, 98], 3, 0.1)).toBe(true);
    expect(isStable([100, 150, 98], 3, 0.1)).toBe(false);
  });

  it('server breakdown from two statistics snapshots', () => {
    const snap = (n: number, execs: number, queueNs: number, inferNs: number, batches: [number, number][]) => ({
      inference_count: n,
      execution_count: execs,
      inference_stats: {
        success: { count: n, ns: 3 * queueNs },
        queue: { ns: queueNs, count: n },
        compute_infer: { ns: inferNs, count: n },
      },
      batch_stats: batches.map(([batch_size, count]) => ({ batch_size, compute_infer: { count } })),
    });
    const b = breakdown(
      snap(10, 10, 0, 0, [[1, 10]]),
      snap(50, 20, 40e6, 80e6, [
        [1, 12],
        [4, 8],
      ]),
    );
    expect(b.requests).toBe(40);
    expect(b.avgBatchSize).toBe(4);
    expect(b.avgQueueMs).toBe(1);
    expect(b.avgRequestMs).toBe(3);
    expect(b.avgComputeInferMs).toBe(2);
    expect(b.batches).toEqual({ 1: 2, 4: 8 });
  });

  it('SVG has one line per series and a legend', () => {
    const svg = latencyThroughputSvg('t <&>', [
      {
        name: 'a',
        points: [
          { x: 1, y: 2 },
          { x: 3, y: 4 },
        ],
      },
      { name: 'b', points: [{ x: 2, y: 1 }] },
    ]);
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.match(/<polyline/g)).toHaveLength(2);
    expect(svg).toContain('&lt;&amp;&gt;');
  });

  it('SVG joins a series in the order measured, even where throughput falls past saturation', () => {
    const svg = latencyThroughputSvg('t', [
      {
        name: 'off',
        points: [
          { x: 10, y: 1 },
          { x: 30, y: 2 },
          { x: 20, y: 9 },
        ],
      },
    ]);
    const xs = /<polyline[^>]*points="([^"]+)"/
      .exec(svg)![1]!
      .split(' ')
      .map((p) => Number(p.split(',')[0]));
    expect(xs[2]).toBeLessThan(xs[1]!);
  });
});
