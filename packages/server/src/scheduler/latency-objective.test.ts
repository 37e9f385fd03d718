import { describe, expect, it } from 'vitest';
import type { ModelConfig } from '../config/model-config.ts';
import { schedulerHarness } from '../../test-support/scheduler.ts';
import { latencyObjectiveNs } from './latency-objective.ts';

const objective = (ms: string) => ({ parameters: { batchwise_latency_objective_ms: { string_value: ms } } });
const MISS = "UNAVAILABLE: request would miss the latency objective of 10 ms for model 'm'";

/** A model with a 10 ms objective whose instance has run one batch of 1 in 4 ms (so t(b) is taken as 4·b ms). */
async function taught(dynamic: Record<string, unknown> = {}) {
  const harness = schedulerHarness({ dynamic_batching: dynamic, ...objective('10') });
  void harness.send('warm', [0]);
  harness.clock.advanceMs(4);
  harness.models[0]!.finish();
  await harness.flush();
  harness.settled.length = 0;
  return harness;
}

describe('batchwise_latency_objective_ms: validation', () => {
  const config = (value: string, extra: Partial<ModelConfig> = { dynamic_batching: {} }): ModelConfig => ({
    name: 'm',
    max_batch_size: 8,
    input: [],
    output: [],
    ...extra,
    ...objective(value),
  });

  it('reads milliseconds, fractions included', () => {
    expect(latencyObjectiveNs(config('50'))).toBe(50_000_000n);
    expect(latencyObjectiveNs(config(' 2.5 '))).toBe(2_500_000n);
    expect(latencyObjectiveNs({ name: 'm', max_batch_size: 8, input: [], output: [] })).toBeUndefined();
  });

  it.each(['0', '-5', 'abc', '', 'Infinity', 'NaN'])("refuses '%s' at load, naming the parameter and the value", (value) => {
    expect(() => latencyObjectiveNs(config(value))).toThrow(
      `model 'm': parameter batchwise_latency_objective_ms must be a positive number of milliseconds, got '${value}'`,
    );
  });

  it('requires dynamic_batching', () => {
    expect(() => latencyObjectiveNs(config('50', {}))).toThrow(/batchwise_latency_objective_ms requires dynamic_batching.*got '50'/);
  });
});

describe('batchwise_latency_objective_ms: batches', () => {
  it('without an objective nothing changes: max_queue_delay is waited out, and statistics and metrics have no objective', async () => {
    const dynamic = { dynamic_batching: { max_queue_delay_microseconds: 5000 } };
    const strict = { batchwise_adaptive_queue_delay: { string_value: 'false' } };
    const plain = schedulerHarness({ ...dynamic, parameters: strict });
    void plain.send('a', [1]);
    plain.clock.advanceMs(4.9);
    expect(plain.models[0]!.batches).toEqual([]);
    plain.clock.advanceMs(0.1);
    expect(plain.models[0]!.batches).toEqual([[1]]);
    expect(plain.stats.snapshot()).not.toHaveProperty('batchwise_latency_objective');
    expect((await plain.metrics.latencyObjectiveSeconds.get()).values).toEqual([]);
    expect((await plain.metrics.latencyObjectiveShed.get()).values).toEqual([]);

    // The same model with an objective computes its wait instead (none, before any run time is known).
    const withObjective = schedulerHarness({ ...dynamic, parameters: { ...strict, ...objective('10').parameters } });
    void withObjective.send('a', [1]);
    withObjective.clock.endTurn();
    expect(withObjective.models[0]!.batches).toEqual([[1]]);
  });

  it('model_warmup runs are the profile before the first live batch: the statistics show them, and a request that cannot make it is refused', async () => {
    // Warmup ran batches of 1 and 4 on the instance: t(1) = 4 ms, t(4) = 7 ms.
    const warmupRuns = [
      { instance: 0, batchSize: 1, ns: 4_000_000 },
      { instance: 0, batchSize: 4, ns: 7_000_000 },
    ];
    const { send, clock, models, stats, settled, flush } = schedulerHarness({ dynamic_batching: {}, ...objective('10') }, { warmupRuns });
    const profile = stats.snapshot().batchwise_latency_objective!.profile;
    expect(profile).toHaveLength(1);
    expect(profile[0]!.by_batch_size).toEqual([
      { batch_size: 1, ms: 4 },
      { batch_size: 4, ms: 7 },
    ]);
    // The instance is busy with a batch of 4 (about 7 ms); 4 more samples queued behind it
    // would end at about 7 + 7 = 14 ms > 10 ms: refused at once, before any live batch ended.
    void send('a', [1, 2, 3, 4]);
    clock.endTurn();
    expect(models[0]!.batches).toHaveLength(1);
    void send('b', [5, 6, 7, 8]);
    await flush();
    expect(stats.snapshot().batchwise_latency_objective!.shed.admission).toBe(1);
    clock.advanceMs(10); // answered at its deadline: arrival + the objective
    await flush();
    expect(settled).toEqual([{ name: 'b', value: MISS, at: 10_000_000n }]);
  });

  it('under load a request waits for the batch the objective affords, and the choice shows in statistics and metrics', async () => {
    const { send, clock, models, flush, stats, metrics } = schedulerHarness({ dynamic_batching: {}, ...objective('50') });
    void send('warm', [0]);
    clock.advanceMs(1); // t(1) = 1 ms
    models[0]!.finish();
    await flush();
    void send('x', [1]); // a gap of 1 ms: batches of 1 keep up, so it goes at once
    clock.endTurn();
    expect(models[0]!.batches).toEqual([[0], [1]]);
    clock.advanceMs(0.1);
    void send('q0', [10]);
    clock.advanceMs(0.1);
    void send('q1', [11]);
    models[0]!.finish();
    await flush();
    // Two queued, arrivals 0.4 ms apart: a batch of 2 would fall behind; a batch of 8 fits in 45 ms.
    expect(models[0]!.batches).toEqual([[0], [1]]);
    const choice = stats.snapshot().batchwise_latency_objective!;
    expect(choice.target_batch_size).toBe(8);
    expect(choice.current_wait_ms).toBeCloseTo(2.4, 6);
    expect(choice.arrival_rate_per_second).toBeCloseTo(2500, 6);
    expect(choice.profile).toHaveLength(1);
    expect((await metrics.latencyObjectiveTargetBatchSize.get()).values[0]).toMatchObject({
      value: 8,
      labels: { model: 'm', version: '1' },
    });
    for (let i = 2; i < 8; i++) {
      clock.advanceMs(0.1);
      void send(`q${i}`, [10 + i]);
    }
    clock.endTurn();
    expect(models[0]!.batches).toEqual([[0], [1], [10, 11, 12, 13, 14, 15, 16, 17]]);
  });

  it('feeds the profile from every batch: statistics show the fit of each instance', async () => {
    const { stats } = await taught();
    expect(stats.snapshot().batchwise_latency_objective).toMatchObject({
      objective_ms: 10,
      profile: [{ instance: 0, fixed_ms: 0, per_sample_ms: 4, by_batch_size: [{ batch_size: 1, ms: 4 }] }],
    });
  });
});

describe('batchwise_latency_objective_ms: early shedding', () => {
  it('refuses, with 503 naming the objective, a request the queue ahead would make late: counted at once, answered at its deadline', async () => {
    const { send, clock, flush, settled, stats, metrics, models } = await taught();
    void send('running', [1]);
    clock.endTurn(); // runs for an expected 4 ms
    void send('fits', [2]); // 4 ms + 4 ms: in time
    const lateNs = clock.nowNs();
    void send('late', [3]); // 4 ms + a batch of 2 (8 ms): late
    await flush();
    expect(settled).toEqual([]);
    const snapshot = stats.snapshot();
    expect(snapshot.inference_stats.fail.count).toBe(1);
    expect(snapshot.batchwise_latency_objective!.shed).toEqual({ admission: 1, queued: 0 });
    const shed = (await metrics.latencyObjectiveShed.get()).values;
    expect(shed.find((v) => v.labels.reason === 'admission')?.value).toBe(1);
    const failures = (await metrics.requestFailure.get()).values;
    expect(failures.find((v) => v.labels.reason === 'REJECTED')?.value).toBe(1);
    models[0]!.finish();
    await flush();
    clock.advanceMs(2); // 'fits' may wait a little for company (arrivals 1.3 ms apart, batches of 1 falling behind)
    models[0]!.finish();
    await flush();
    clock.advanceMs(8);
    await flush();
    expect(settled.map((s) => s.name)).toEqual(['running', 'fits', 'late']);
    expect(settled[2]).toEqual({ name: 'late', value: MISS, at: lateNs + 10_000_000n });
  });

  it('takes a queued request out as soon as it can no longer finish in time, even while every instance is busy; refused at its deadline', async () => {
    const { send, clock, flush, settled, stats, models } = await taught();
    const startNs = clock.nowNs();
    const shed = () => stats.snapshot().batchwise_latency_objective!.shed;
    void send('running', [1]);
    clock.endTurn();
    void send('queued', [2]); // admitted: 4 + 4 ms expected; gives up at 10 - 4 = 6 ms
    clock.advanceMs(5.9);
    await flush();
    expect(shed()).toEqual({ admission: 0, queued: 0 });
    clock.advanceMs(0.1);
    await flush();
    expect(shed()).toEqual({ admission: 0, queued: 1 });
    models[0]!.finish(); // the instance frees: the request left the queue, nothing runs it
    await flush();
    expect(models[0]!.batches).toHaveLength(2); // 'warm' and 'running'
    clock.advanceMs(4);
    await flush();
    expect(settled).toEqual([
      { name: 'running', value: [2], at: startNs + 6_000_000n },
      { name: 'queued', value: MISS, at: startNs + 10_000_000n },
    ]);
  });

  it('never refuses a request that would start at once on a free instance: its run refreshes the profile', async () => {
    const harness = schedulerHarness({ dynamic_batching: {}, ...objective('10') });
    void harness.send('cold', [0]);
    harness.clock.advanceMs(50); // a slow first run: t(1) = 50 ms, past the objective
    harness.models[0]!.finish();
    await harness.flush();
    void harness.send('next', [1]);
    harness.clock.advanceMs(1);
    harness.models[0]!.finish();
    await harness.flush();
    expect(harness.settled.map((s) => [s.name, s.value])).toEqual([
      ['cold', [1]],
      ['next', [2]],
    ]);
    expect(harness.stats.snapshot().batchwise_latency_objective!.profile[0]!.by_batch_size[0]!.ms).toBeCloseTo(45.1, 6);
  });

  it('timeout_action DELAY keeps them: late requests are admitted, stay queued and are served', async () => {
    const { send, clock, flush, settled, models, stats } = await taught({ default_queue_policy: { timeout_action: 'DELAY' } });
    void send('running', [1]);
    clock.endTurn();
    void send('a', [2]);
    void send('b', [3]);
    clock.advanceMs(20);
    await flush();
    expect(settled).toEqual([]);
    models[0]!.finish();
    await flush();
    models[0]!.finish();
    await flush();
    expect(settled.map((s) => [s.name, s.value])).toEqual([
      ['running', [2]],
      ['a', [3]],
      ['b', [4]],
    ]);
    expect(stats.snapshot().batchwise_latency_objective!.shed).toEqual({ admission: 0, queued: 0 });
  });
});

describe('batchwise_latency_objective_ms: under overload (issue 30)', () => {
  it("profiles the model's compute: a run whose reply waited on a busy event loop does not make later estimates slower", async () => {
    const { send, clock, flush, settled, models, stats } = await taught(); // t(1) = 4 ms
    models[0]!.handoffMs = 6; // the next run computes 4 ms, and its reply is read 6 ms later
    void send('slow reply', [1]);
    clock.advanceMs(10);
    models[0]!.finish();
    await flush();
    models[0]!.handoffMs = 0;
    const [profile] = stats.snapshot().batchwise_latency_objective!.profile;
    expect(profile!.by_batch_size).toEqual([{ batch_size: 1, ms: 4 }]);
    expect(profile!.handoff_ms).toBe(0); // the least hand-off of recent runs: the quiet one
    // Still 4 + 4 ms for a request behind a running one: admitted (a 10 ms profile would refuse it).
    void send('running', [2]);
    clock.endTurn();
    void send('fits', [3]);
    await flush();
    expect(settled.map((s) => s.name)).toEqual(['slow reply']);
  });

  it('adds the hand-off every run pays to its compute', async () => {
    const harness = schedulerHarness({ dynamic_batching: {}, ...objective('10') });
    harness.models[0]!.handoffMs = 1;
    for (const name of ['a', 'b']) {
      void harness.send(name, [0]);
      harness.clock.advanceMs(5); // 4 ms of compute and 1 of hand-off, twice
      harness.models[0]!.finish();
      await harness.flush();
    }
    const [profile] = harness.stats.snapshot().batchwise_latency_objective!.profile;
    expect([profile!.by_batch_size[0]!.ms, profile!.handoff_ms]).toEqual([4, 1]);
    harness.settled.length = 0;
    void harness.send('running', [1]);
    harness.clock.endTurn(); // expected 5 ms
    void harness.send('fits', [2]); // 5 + 5 = 10 ms: in time, just
    await harness.flush();
    const shed = () => harness.stats.snapshot().batchwise_latency_objective!.shed.admission;
    expect(shed()).toBe(0);
    harness.clock.advanceMs(0.001);
    void harness.send('late', [3]); // a batch of 2 behind it: 5 + 4·2 + 1 = 14 ms
    await harness.flush();
    expect(shed()).toBe(1);
  });

  it("counts the event loop's lag twice into a request's age: before the server read it, and before its reply leaves", async () => {
    const { send, clock, flush, settled, stats } = await taught();
    clock.lag = 1_000_000; // 1 ms
    void send('running', [1]);
    clock.endTurn();
    void send('late', [2]); // 4 + 4 ms, and 2 ms of the loop's lag: 10 ms, in time
    await flush();
    const shed = () => stats.snapshot().batchwise_latency_objective!.shed.admission;
    expect(shed()).toBe(0);
    clock.lag = 1_500_000;
    void send('later', [3]); // with 1.5 ms of lag twice, and a batch of 2: late
    await flush();
    expect(shed()).toBe(1);
    expect(settled).toEqual([]);
    expect(stats.snapshot().batchwise_latency_objective!.event_loop_lag_ms).toBe(1.5);
  });
});

describe('batchwise_latency_objective_ms: refusal on arrival, before the body is read (issue 30)', () => {
  it('answers what the admission test would, and counts the refusal', async () => {
    const { scheduler, send, clock, flush, stats } = await taught(); // t(1) = 4 ms
    expect(scheduler.shedOnArrival(1, clock.nowNs())).toBeUndefined(); // a free instance, nothing queued
    void send('running', [1]);
    clock.endTurn();
    clock.advanceMs(1);
    expect(scheduler.shedOnArrival(1, clock.nowNs())).toBeUndefined(); // 3 ms left of the run + 4 ms: in time
    void send('queued', [2]);
    clock.endTurn();
    const refusal = scheduler.shedOnArrival(1, clock.nowNs()); // 3 + a batch of 2 (8 ms) = 11 ms: late
    expect(refusal?.error.message).toBe("request would miss the latency objective of 10 ms for model 'm'");
    expect(refusal?.answerAtNs).toBe(clock.nowNs() + 10_000_000n); // at its deadline
    expect(stats.snapshot().batchwise_latency_objective!.shed).toEqual({ admission: 1, queued: 0 });
    expect(stats.snapshot().inference_stats.fail.count).toBe(1);
    await flush();
  });

  it('refuses nothing early when any queue policy keeps late requests (timeout_action DELAY): only the body names its priority', async () => {
    const { scheduler, send, clock } = await taught({
      priority_levels: 2,
      priority_queue_policy: { 2: { timeout_action: 'DELAY' } },
    });
    void send('running', [1]);
    clock.endTurn();
    void send('queued', [2]);
    void send('queued too', [3]);
    clock.endTurn();
    expect(scheduler.shedOnArrival(1, clock.nowNs())).toBeUndefined();
  });
});

describe('batchwise_latency_objective_ms: the admission limit found by feedback (issue 30)', () => {
  it('a batch that ended late cuts the limit by a tenth, one in time raises it; past the limit a request is refused though the estimate says in time', async () => {
    const { send, clock, flush, models, stats } = await taught(); // t(1) = 4 ms, objective 10 ms
    const limit = () => stats.snapshot().batchwise_latency_objective!.limit_samples;
    expect(limit()).toBe(32); // four full batches of 8 on the one instance
    for (let i = 0; i < 30; i++) {
      void send(`late ${i}`, [i]);
      clock.advanceMs(11); // ends 11 ms after its arrival: late
      models[0]!.finish();
      await flush();
    }
    expect(limit()).toBeCloseTo(32 * 0.9 ** 30, 6); // about 1.36
    void send('running', [1]);
    clock.endTurn();
    const shed = () => stats.snapshot().batchwise_latency_objective!.shed.admission;
    void send('queued', [2]); // 4 + 4 ms: in time by the estimate, but 2 samples admitted would pass the limit
    await flush();
    expect(shed()).toBe(1);
    clock.advanceMs(4);
    models[0]!.finish(); // in time: the limit grows by 1 / limit
    await flush();
    expect(limit()).toBeCloseTo(32 * 0.9 ** 30 + 1 / (32 * 0.9 ** 30), 6);
  });
});

describe('batchwise_latency_objective_ms: under overload (issue 44)', () => {
  /** Warmup ran batches of 1 and 4: t(1) = 4 ms, t(4) = 7 ms, so t(b) = 3 ms + 1 ms·b. */
  const warmupRuns = [
    { instance: 0, batchSize: 1, ns: 4_000_000 },
    { instance: 0, batchSize: 4, ns: 7_000_000 },
  ];
  const fitted = (dynamic: Record<string, unknown> = {}) =>
    schedulerHarness({ dynamic_batching: dynamic, ...objective('10') }, { warmupRuns });

  it('admits a request only while the first request of the batch it joins stays in time', async () => {
    const { send, clock, flush, stats } = fitted();
    const shed = () => stats.snapshot().batchwise_latency_objective!.shed.admission;
    void send('running', [0]);
    clock.endTurn(); // expected to end at 4 ms
    void send('first', [1]); // 4 + t(1) = 8 ms
    clock.advanceMs(3);
    void send('second', [2]);
    void send('third', [3]); // a batch of 3 ends at 4 + 6 = 10 ms: 'first' in time, just
    await flush();
    expect(shed()).toBe(0);
    // A batch of 4 would end at 4 + 7 = 11 ms: 'first' late, though 'fourth' itself would take 8 ms.
    void send('fourth', [4]);
    await flush();
    expect(shed()).toBe(1);
  });

  it('a queued request gives up when the batch it joined can no longer finish in time, not only a batch of one', async () => {
    const { send, clock, flush, stats, settled } = fitted();
    const queued = () => stats.snapshot().batchwise_latency_objective!.shed.queued;
    void send('running', [0]);
    clock.endTurn();
    void send('a', [1]); // alone in its batch: gives up at 10 - t(1) = 6 ms
    void send('b', [2]); // second of a batch of 2: gives up at 10 - t(2) = 5 ms
    clock.advanceMs(4.9);
    await flush();
    expect(queued()).toBe(0);
    clock.advanceMs(0.1);
    await flush();
    expect(queued()).toBe(1);
    clock.advanceMs(5); // the run has not ended: 'a' gave up at 6 ms; both are refused at their deadline
    await flush();
    expect(settled).toEqual([
      { name: 'b', value: MISS, at: 10_000_000n },
      { name: 'a', value: MISS, at: 10_000_000n },
    ]);
  });

  it('sheds at dispatch the queued requests the batch would finish late, after a run that took longer than expected', async () => {
    const { send, clock, flush, models, stats, settled } = fitted();
    void send('running', [0]);
    clock.endTurn(); // expected to end at 4 ms
    void send('a', [1]); // gives up at 6 ms (a batch of one)
    clock.advanceMs(2.5);
    void send('b', [2]); // a batch of 2 ends at 4 + 5 = 9 ms: in time for 'a'; 'b' gives up at 7.5 ms
    await flush();
    clock.advanceMs(3); // the run ends at 5.5 ms, 1.5 ms late
    models[0]!.finish();
    await flush();
    // With 'b', the batch would end at 5.5 + t(2) (about 5 ms): past 'a''s deadline, 10 ms. 'b' runs alone.
    expect(models[0]!.batches).toEqual([[0], [2]]);
    expect(stats.snapshot().batchwise_latency_objective!.shed).toEqual({ admission: 0, queued: 1 });
    clock.advanceMs(4.5); // 'a' is refused at its deadline
    await flush();
    expect(settled.map((s) => [s.name, s.value, s.at])).toEqual([
      ['running', [1], 5_500_000n],
      ['a', MISS, 10_000_000n],
    ]);
  });

  it('sends the next batch to the instance before the replies of the one that ended', async () => {
    const { send, clock, flush, models } = fitted();
    let batchesWhenAnswered: number | undefined;
    void send('running', [0]).then(() => (batchesWhenAnswered = models[0]!.batches.length));
    clock.endTurn();
    void send('next', [1]);
    await flush();
    clock.advanceMs(4);
    models[0]!.finish();
    await flush();
    // 'next' went to the instance before 'running''s promise jobs ran, not at the end of the turn after them.
    expect(batchesWhenAnswered).toBe(2);
    expect(models[0]!.batches).toEqual([[0], [1]]);
  });

  it('a late batch cuts the admission limit once per round trip: not again for a batch admitted before that cut', async () => {
    // DELAY: nothing is shed, so the batches queued behind a slow run end late too.
    const { send, clock, flush, models, stats } = await taught({ default_queue_policy: { timeout_action: 'DELAY' } });
    const limit = () => stats.snapshot().batchwise_latency_objective!.limit_samples;
    expect(limit()).toBe(32);
    void send('slow', [1]);
    clock.endTurn();
    void send('behind', [2]);
    clock.advanceMs(11);
    models[0]!.finish(); // 11 ms: late, the limit is cut
    await flush();
    expect(limit()).toBeCloseTo(32 * 0.9, 6);
    clock.advanceMs(4);
    models[0]!.finish(); // 'behind' ends 15 ms after its arrival, before the cut: no second cut
    await flush();
    expect(limit()).toBeCloseTo(32 * 0.9, 6);
    void send('after', [3]);
    clock.endTurn();
    clock.advanceMs(11);
    models[0]!.finish(); // admitted after the cut, and late: cut again
    await flush();
    expect(limit()).toBeCloseTo(32 * 0.81, 6);
  });
});
