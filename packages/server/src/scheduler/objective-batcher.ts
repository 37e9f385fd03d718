import type { LatencyObjectiveStatistics } from '../protocol/types.ts';
import { ArrivalGap } from './arrival-gap.ts';
import type { BatchChoice } from './batch-choice.ts';
import { chooseForObjective, expectedFinishNs } from './objective-choice.ts';
import { RunTimeProfile } from './run-time-profile.ts';
import type { QueuedRequest } from './scheduler.ts';

type Rule = Parameters<typeof chooseForObjective>[1];

/** Runs the hand-off estimate looks back over. */
const HANDOFF_WINDOW = 32;

/**
 * What a run costs beyond the model's own compute: the hand-off to the instance's thread and
 * back, as it is when the event loop is free: the least (wall time - compute time) of the
 * recent runs. A busy event loop delays a run's reply too, but that delay belongs to every
 * request alike and is counted once, from the loop's lag (EventLoopLag), not into the run time:
 * a profile that took it in would grow while 503s keep the loop busy, refuse more, and keep it
 * busier (issue 30).
 */
class HandoffEstimate {
  private readonly recent: number[] = [];
  private next = 0;
  private least = 0;

  note(ns: number): void {
    if (this.recent.length < HANDOFF_WINDOW) this.recent.push(ns);
    else this.recent[this.next] = ns;
    this.next = (this.next + 1) % HANDOFF_WINDOW;
    this.least = Math.min(...this.recent);
  }

  get ns(): number {
    return this.least;
  }
}

/**
 * The state behind a model's latency objective: a run-time profile per instance (fed by the
 * compute time of every batch it runs) and its hand-off cost, the arrival rate, the batches
 * running, and what was last decided, for statistics and metrics. The scheduler asks it for a
 * batch (choose), whether to admit a request (admits), and when a queued request can no longer
 * make it (giveUpAtNs).
 */
export class ObjectiveBatcher {
  private readonly profiles: RunTimeProfile[];
  private readonly handoffs: HandoffEstimate[];
  private readonly arrivals = new ArrivalGap();
  private readonly running: ({ startNs: bigint; samples: number } | undefined)[];
  private lastWaitNs = 0;
  private lastTarget = 0;
  private readonly shed = { admission: 0, queued: 0 };
  readonly objectiveMs: number;
  /**
   * Samples admitted at once (queued and running) at most: found by feedback, as TCP finds its
   * window. A batch whose oldest request ended within the objective raises it by that batch's
   * samples over the limit (one sample per limit's worth of samples served); one that ended late
   * cuts it by a tenth. The estimate of expectedLatencyNs cannot see everything a request waits
   * for (its body's decoding, the batcher waiting for company it expects, replies queued behind
   * other work), and at 64 clients of a closed loop it admitted requests that took four times the
   * objective (issue 30); the limit holds admission to what has been seen to finish in time.
   */
  private limitSamples: number;
  /** The limit's ceiling: four full batches on every instance. */
  private readonly ceilingSamples: number;

  constructor(
    readonly objectiveNs: bigint,
    instances: number,
    private readonly maxBatchSize: number,
  ) {
    this.profiles = Array.from({ length: instances }, () => new RunTimeProfile());
    this.handoffs = Array.from({ length: instances }, () => new HandoffEstimate());
    this.running = Array.from({ length: instances }, () => undefined);
    this.objectiveMs = Number(objectiveNs) / 1e6;
    this.ceilingSamples = maxBatchSize * instances * 4;
    this.limitSamples = this.ceilingSamples;
  }

  noteArrival(arrivalNs: bigint): void {
    this.arrivals.note(arrivalNs);
  }

  /** The mean recent gap, or the time since the last arrival once that is longer (arrivals slowed or stopped). */
  private gapNs(nowNs: bigint): number | undefined {
    const mean = this.arrivals.expectedNs;
    if (mean === undefined) return undefined;
    const since = nowNs - this.arrivals.lastNs!;
    return Number(since > mean ? since : mean);
  }

  /** Expected time of a batch of `batchSize` on the instance, dispatch to results: its compute and the hand-off. */
  private expectedRunNs(instance: number, batchSize: number): number | undefined {
    const computeNs = this.profiles[instance]!.expectedNs(batchSize);
    return computeNs === undefined ? undefined : computeNs + this.handoffs[instance]!.ns;
  }

  choose(queue: Iterable<{ readonly request: QueuedRequest }>, rule: Rule, nowNs: bigint, instance: number): BatchChoice {
    const decision = chooseForObjective(queue, rule, nowNs, {
      objectiveNs: Number(this.objectiveNs),
      expectedRunNs: (b) => this.expectedRunNs(instance, b),
      arrivalGapNs: this.gapNs(nowNs),
      instances: this.profiles.length,
    });
    this.lastWaitNs = decision.waitNs;
    this.lastTarget = decision.targetBatchSize;
    return decision.choice;
  }

  started(instance: number, samples: number, nowNs: bigint): void {
    this.running[instance] = { startNs: nowNs, samples };
  }

  /**
   * A batch ended: `computeNs` is what the instance reports of its run (ExecutionTimings), the
   * rest of the time since dispatch its hand-off; a failed run says nothing of run time.
   */
  finished(instance: number, nowNs: bigint, computeNs: number | undefined, oldestArrivalNs?: bigint, lagNs = 0): void {
    const run = this.running[instance];
    this.running[instance] = undefined;
    if (!run || computeNs === undefined) return;
    this.observeRun(instance, run.samples, Number(nowNs - run.startNs), computeNs);
    if (oldestArrivalNs !== undefined) this.adjustLimit(run.samples, oldestArrivalNs, nowNs, lagNs);
  }

  /** Samples the running batches hold. */
  get runningSamples(): number {
    let samples = 0;
    for (const run of this.running) samples += run?.samples ?? 0;
    return samples;
  }

  /** A run of `samples` on the instance took `ns` from dispatch to results, `computeNs` of it in the model: live batches, and model_warmup's runs before the first. */
  observeRun(instance: number, samples: number, ns: number, computeNs: number = ns): void {
    const compute = Math.min(computeNs, ns);
    this.profiles[instance]?.observe(samples, compute);
    this.handoffs[instance]?.note(ns - compute);
  }

  /** A batch of `samples` ended; its oldest request arrived at `oldestArrivalNs`. */
  private adjustLimit(samples: number, oldestArrivalNs: bigint, nowNs: bigint, lagNs: number): void {
    // As expectedLatencyNs counts it: to the results, and the event loop's lag before and after.
    const latencyNs = Number(nowNs - oldestArrivalNs) + 2 * lagNs;
    if (latencyNs > Number(this.objectiveNs)) this.limitSamples = Math.max(1, this.limitSamples * 0.9);
    else this.limitSamples = Math.min(this.ceilingSamples, this.limitSamples + samples / this.limitSamples);
  }

  /**
   * Whether a request of `samples`, with `admittedSamples` queued and running, fits the limit and,
   * by its expectedLatencyNs, is still expected to finish within the objective. The estimate is
   * true while any instance has no run time yet: nothing is refused on a guess; nor is a request
   * refused for the limit when nothing else is admitted.
   */
  admits(expectedLatencyNs: number | undefined, admittedSamples: number, samples: number): boolean {
    if (admittedSamples + samples > this.limitSamples && admittedSamples > 0) return false;
    return expectedLatencyNs === undefined || expectedLatencyNs <= Number(this.objectiveNs);
  }

  /**
   * The latency a request of `samples` samples that arrived at `arrivalNs`, queued behind
   * `samplesAhead`, is expected to see, from its arrival (uncalibrated); undefined while any
   * instance has no run time yet.
   */
  expectedLatencyNs(samplesAhead: number, samples: number, arrivalNs: bigint, nowNs: bigint, lagNs = 0): number | undefined {
    const outlook = this.profiles.map((_, i) => {
      const run = this.running[i];
      const expectedRunNs = (b: number) => this.expectedRunNs(i, b);
      if (!run) return { busyForNs: 0, expectedRunNs };
      const endNs = Number(run.startNs - nowNs) + (this.expectedRunNs(i, run.samples) ?? 0);
      return { busyForNs: Math.max(0, endNs), expectedRunNs };
    });
    const finishNs = expectedFinishNs(samplesAhead, samples, outlook, this.maxBatchSize);
    // The event loop's lag twice: before the server saw the request, and before its reply leaves.
    return finishNs === undefined ? undefined : Number(nowNs - arrivalNs) + 2 * lagNs + finishNs;
  }

  /**
   * When a queued request can no longer finish in time even if it ran alone at once on the
   * fastest instance; undefined before every instance has run.
   */
  giveUpAtNs(arrivalNs: bigint, samples: number): bigint | undefined {
    let fastest = Infinity;
    for (let i = 0; i < this.profiles.length; i++) fastest = Math.min(fastest, this.expectedRunNs(i, samples) ?? NaN);
    if (Number.isNaN(fastest)) return undefined;
    return arrivalNs + this.objectiveNs - BigInt(Math.ceil(fastest));
  }

  countShed(where: 'admission' | 'queued'): void {
    this.shed[where]++;
  }

  statistics(nowNs: bigint, lagNs: number): LatencyObjectiveStatistics {
    const gap = this.gapNs(nowNs);
    return {
      objective_ms: this.objectiveMs,
      event_loop_lag_ms: lagNs / 1e6,
      limit_samples: this.limitSamples,
      current_wait_ms: this.lastWaitNs / 1e6,
      target_batch_size: this.lastTarget,
      arrival_rate_per_second: gap === undefined ? 0 : 1e9 / Math.max(gap, 1),
      shed: { ...this.shed },
      profile: this.profiles.flatMap((profile, instance) => {
        const fit = profile.fit();
        if (!fit) return [];
        return [
          {
            instance,
            fixed_ms: fit.fixedNs / 1e6,
            per_sample_ms: fit.perSampleNs / 1e6,
            handoff_ms: this.handoffs[instance]!.ns / 1e6,
            by_batch_size: fit.bySize.map(({ batchSize, ns }) => ({ batch_size: batchSize, ms: ns / 1e6 })),
          },
        ];
      }),
    };
  }
}
