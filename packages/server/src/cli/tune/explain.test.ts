import { describe, expect, it } from 'vitest';
import { describeLevel, explainMiss, hostWarnings, missedBy, serverP99, smallHostWarning } from './explain.ts';
import type { CpuFigures, ServerFigures } from './level-figures.ts';
import type { CandidateRun, LevelResult } from './run-candidate.ts';

/** The server's figures; its p99 in the histogram bucket (above, atMost]. */
const server = (requestMs: number, queueMs: number, computeMs: number, p99?: [number, number]): ServerFigures => ({
  requests: 100,
  executions: 100,
  avgBatchSize: 1,
  avgRequestMs: requestMs,
  avgQueueMs: queueMs,
  avgComputeInferMs: computeMs,
  batches: { 1: 100 },
  ...(p99 && { p99BucketMs: { aboveMs: p99[0], atMostMs: p99[1] } }),
});
const cpu = (generatorCores: number, serverCores: number, otherCores = 0.05): CpuFigures => ({
  generatorCores,
  serverCores,
  otherCores,
  cores: 2,
});
const level = (p50Ms: number, p99Ms: number, figures: Pick<LevelResult, 'server' | 'cpu'> = {}): LevelResult => ({
  concurrency: 1,
  throughput: 400,
  p50Ms,
  p90Ms: p99Ms,
  p99Ms,
  requests: 400,
  errors: 0,
  ...figures,
});

describe('describeLevel', () => {
  it("gives the server's p99 as its histogram bucket", () => {
    const at = (p99BucketMs: ServerFigures['p99BucketMs']) =>
      serverP99(level(1, 2, { server: { ...server(1, 0, 1), ...(p99BucketMs && { p99BucketMs }) } }));
    expect(at({ aboveMs: 0, atMostMs: 0.1 })).toBe('at most 0.1');
    expect(at({ aboveMs: 5, atMostMs: 10 })).toBe('5-10');
    expect(at({ aboveMs: 30_000 })).toBe('above 30000');
    expect(at(undefined)).toBe('-');
  });

  it("puts the server's figures and the CPU beside the client's latency", () => {
    expect(describeLevel(level(2.2, 9.1, { server: server(1.6, 0.1, 1.4, [1, 2.5]), cpu: cpu(0.85, 1.05) }))).toBe(
      'client p50 2.20 / p99 9.10 ms; in the server 1.60 ms per request (of which queue 0.10, compute 1.40), p99 1-2.5 ms, mean batch 1.0; ' +
        'CPU: load generator 0.85, server 1.05, other 0.05 of 2 cores (saturated)',
    );
  });

  it('leaves out what could not be read', () => {
    expect(describeLevel(level(2.2, 9.1))).toBe('client p50 2.20 / p99 9.10 ms');
  });
});

describe('explainMiss', () => {
  it("says the server's own latency was within the objective, and what the generator took, when its p99 bucket is within", () => {
    const miss = explainMiss(level(2.2, 9.1, { server: server(1.6, 0.1, 1.4, [0, 2.5]), cpu: cpu(0.85, 1.05) }), 7);
    expect(miss.byMs).toBeCloseTo(2.1);
    expect(miss.fraction).toBeCloseTo(0.3);
    expect(missedBy(miss)).toBe('2.10 ms (30% over)');
    expect(miss.why).toMatch(
      /^the server's own latency was within the objective while the client's was not: in the server 1\.60 ms per request/,
    );
    expect(miss.why).toContain(
      "the load generator used 0.85 of the host's 2 cores beside the server's 1.05 and other processes' 0.05: the host was saturated",
    );
    expect(miss.why).toContain('Measured by a client on another machine, this config may meet 7ms.');
  });

  it('says the server itself was slower than the objective, computing or queueing', () => {
    const computing = explainMiss(level(9, 12, { server: server(9, 0.5, 8.5, [5, 10]), cpu: cpu(0.1, 1) }), 7);
    expect(computing.why).toMatch(/^the server itself took longer than 7ms: 9\.00 ms per request .*most of it computing/);
    expect(computing.why).not.toContain('saturated');
    const queueing = explainMiss(level(9, 12, { server: server(9, 6, 3, [5, 10]) }), 7);
    expect(queueing.why).toMatch(/most of it waiting in the queue/);
  });

  it("says the tail is in the server when its mean is within the objective and its p99's bucket is past it", () => {
    const miss = explainMiss(level(2, 9, { server: server(1.4, 0.1, 1, [5, 10]), cpu: cpu(0.14, 1.03, 0.38) }), 4);
    expect(miss.why).toBe(
      "the server's own p99 was past 4ms too (5-10 ms by its histogram), though a request took 1.40 ms there on average " +
        '(of which queue 0.10, compute 1.00; mean batch 1.0): the tail is in the server, where a request sometimes waits for a batch, an instance or a core. ' +
        "The load generator used 0.14 of the host's 2 cores beside the server's 1.03 and other processes' 0.38.",
    );
  });

  it("says the histogram cannot tell when the server's p99 bucket holds the objective", () => {
    const miss = explainMiss(level(3, 9, { server: server(3, 0.5, 2.5, [5, 10]), cpu: cpu(0.5, 1, 0) }), 7);
    expect(miss.why).toMatch(
      /p99 5-10 ms.*its histogram bucket holds 7ms, so whether the server's own p99 was within it cannot be told; the load generator used 0\.50/,
    );
  });

  it('says so when the server gave no figures', () => {
    expect(explainMiss(level(3, 9), 7).why).toBe("the server's statistics could not be read to tell where the time went.");
  });
});

describe('host warnings', () => {
  const run = (id: string, levels: LevelResult[]): CandidateRun => ({
    id,
    stage: 'current',
    knobs: {} as CandidateRun['knobs'],
    status: 'measured',
    levels,
    durationMs: 1,
  });

  it('warns when the generator, the server and the rest saturated the cores, naming the most the generator took', () => {
    const [warning] = hostWarnings([
      run('a', [level(1, 2, { cpu: cpu(0.4, 1.0) }), level(1, 2, { cpu: cpu(0.9, 1.05) })]),
      run('b', [{ ...level(1, 2, { cpu: cpu(0.7, 1.2) }), concurrency: 8 }]),
    ]);
    expect(warning).toMatch(
      /^the host's 2 cores were saturated at 2 of 3 levels measured: .* took up to 0\.90 cores \(a c=1, the server 1\.05\) and other processes up to 0\.05\./,
    );
  });

  it('says nothing when the host had cores to spare or /proc could not be read', () => {
    expect(hostWarnings([run('a', [level(1, 2, { cpu: cpu(0.3, 1.0) }), level(1, 2)])])).toEqual([]);
  });

  it('warns ahead of the sweep on a host of 2 cores or fewer', () => {
    expect(smallHostWarning(2)).toMatch(/^this host has 2 CPU cores: tune's load generator runs on them beside the server/);
    expect(smallHostWarning(1)).toMatch(/^this host has 1 CPU core: .* runs on it/);
    expect(smallHostWarning(4)).toBeUndefined();
  });
});
