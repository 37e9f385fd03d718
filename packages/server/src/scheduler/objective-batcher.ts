import type { LatencyObjectiveStatistics } from '../protocol/types.ts';
import { ArrivalGap } from './arrival-gap.ts';
import type { BatchChoice } from './batch-choice.ts';
import type { Clock } from './clock.ts';
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

/** Batches the reply estimate looks back over. */
const REPLY_WINDOW = 32;

/**
 * What a batch's replies cost the event loop per sample: from the batch's results to the end of that
 * turn of the loop (Clock.defer), in which every request of the batch is answered (split, encoded and
 * written to its socket), over the batch's samples; the least of the recent batches, as other work
 * the turn happened to hold (requests read from other sockets) is no part of it. The last reply of a
 * batch of b leaves about b times this after the results, which the run-time profile cannot see: at
 * 64 clients of the bench's 6x1024 MLP 20 us a sample at the least, a turn of a millisecond or more
 * for a batch of 16 at the median (issue 44).
 */
class ReplyEstimate {
  private readonly recent: number[] = [];
  private next = 0;
  private least = 0;

  note(nsPerSample: number): void {
    if (this.recent.length < REPLY_WINDOW) this.recent.push(nsPerSample);
    else this.recent[this.next] = nsPerSample;
    this.next = (this.next + 1) % REPLY_WINDOW;
    this.least = Math.min(...this.recent);
  }

  get nsPerSample(): number {
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
  private readonly replies = new ReplyEstimate();
  /** When the admission limit was last cut: a batch admitted before it says nothing of the limit since. */
  private lastCutNs = -1n;
  private lastWaitNs = 0;
  private lastTarget = 0;
  private readonly shed = { admission: 0, queued: 0 };
  readonly objectiveMs: number;
  /**
   * Samples admitted at once (queued and running) at most: found by feedback, as TCP finds its
   * window. A batch whose oldest request ended within the objective raises it by that batch's
   * samples over the limit (one sample per limit's worth of samples served); one that ended late
   * cuts it by a tenth, once per round trip (adjustLimit). The estimate of expectedLatencyNs cannot
   * see everything a request waits for (its body's decoding, the batcher waiting for company it
   * expects, replies queued behind other work), and at 64 clients of a closed loop it admitted requests that took four times the
   * objective (issue 30); the limit holds admission to what has been seen to finish in time.
   */
  private limitSamples: number;
  /** The limit's ceiling: four full batches on every instance. */
  private readonly ceilingSamples: number;

  constructor(
    readonly objectiveNs: bigint,
    instances: number,
    private readonly maxBatchSize: number,
    private readonly clock: Clock,
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
   * rest of the time since dispatch its hand-off; a failed run says nothing of run time. Its
   * replies are timed to the end of this turn of the event loop (ReplyEstimate).
   */
  finished(instance: number, nowNs: bigint, computeNs: number | undefined, oldestArrivalNs?: bigint, lagNs = 0): void {
    const run = this.running[instance];
    this.running[instance] = undefined;
    if (!run || computeNs === undefined) return;
    this.observeRun(instance, run.samples, Number(nowNs - run.startNs), computeNs);
    if (oldestArrivalNs !== undefined) this.adjustLimit(run.samples, oldestArrivalNs, nowNs, lagNs);
    const { samples } = run;
    this.clock.defer(() => this.replies.note(Number(this.clock.nowNs() - nowNs) / samples));
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

  /** Expected time from a batch's results until the last of its replies has left. */
  private replyNs(batchSize: number): number {
    return this.replies.nsPerSample * batchSize;
  }

  /**
   * A batch of `samples` ended; its oldest request arrived at `oldestArrivalNs`. A late batch cuts
   * the limit once per round trip, as TCP cuts its window: the batches admitted before a cut ran
   * under the limit it cut, and cutting again for each (one slow stretch of the machine makes
   * several batches late at once) took the limit, and the batches, down to a few samples (issue 44).
   */
  private adjustLimit(samples: number, oldestArrivalNs: bigint, nowNs: bigint, lagNs: number): void {
    // As expectedLatencyNs counts it: to the results, the replies, and the event loop's lag before and after.
    const latencyNs = Number(nowNs - oldestArrivalNs) + 2 * lagNs + this.replyNs(samples);
    if (latencyNs <= Number(this.objectiveNs)) {
      this.limitSamples = Math.min(this.ceilingSamples, this.limitSamples + samples / this.limitSamples);
    } else if (oldestArrivalNs >= this.lastCutNs) {
      this.limitSamples = Math.max(1, this.limitSamples * 0.9);
      this.lastCutNs = nowNs;
    }
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
   * The latency expected for the batch a request of `samples` samples that arrived at `arrivalNs`
   * would join behind `queue` (`samplesAhead` samples, in serving order), as its first request sees
   * it: from that request's arrival (this one's, when it would start a batch) to its batch's last
   * reply, with the event loop's lag twice (before the server read the request, and before its reply
   * leaves). The first request of a batch is the one it can make late: requests admitted on their own
   * deadlines alone grew batches past their first requests' (at 64 clients, batches of 40 to 60 whose
   * first requests had waited a whole run, issue 44). Undefined while any instance has no run time yet.
   */
  expectedLatencyNs(
    queue: Iterable<{ readonly request: QueuedRequest }>,
    samplesAhead: number,
    samples: number,
    arrivalNs: bigint,
    nowNs: bigint,
    lagNs = 0,
  ): number | undefined {
    const outlook = this.profiles.map((_, i) => {
      const run = this.running[i];
      const expectedRunNs = (b: number) => this.expectedRunNs(i, b);
      if (!run) return { busyForNs: 0, expectedRunNs };
      const endNs = Number(run.startNs - nowNs) + (this.expectedRunNs(i, run.samples) ?? 0);
      return { busyForNs: Math.max(0, endNs), expectedRunNs };
    });
    const finishNs = expectedFinishNs(samplesAhead, samples, outlook, this.maxBatchSize);
    if (finishNs === undefined) return undefined;
    // The queue drains in full batches (expectedFinishNs): this request joins the last, which starts at sample `first`.
    const total = samplesAhead + samples;
    const first = Math.floor((total - 1) / this.maxBatchSize) * this.maxBatchSize;
    const firstArrivalNs = first < samplesAhead ? arrivalAtSample(queue, first) : arrivalNs;
    const sinceNs = firstArrivalNs !== undefined && firstArrivalNs < arrivalNs ? nowNs - firstArrivalNs : nowNs - arrivalNs;
    return Number(sinceNs) + 2 * lagNs + finishNs + this.replyNs(total - first);
  }

  /**
   * When a queued request, of a batch expected to hold at least `batchSamples` samples, can no
   * longer finish in time even if that batch ran at once on the fastest instance; undefined before
   * every instance has run.
   */
  giveUpAtNs(arrivalNs: bigint, batchSamples: number): bigint | undefined {
    let fastest = Infinity;
    for (let i = 0; i < this.profiles.length; i++) fastest = Math.min(fastest, this.expectedRunNs(i, batchSamples) ?? NaN);
    if (Number.isNaN(fastest)) return undefined;
    return arrivalNs + this.objectiveNs - BigInt(Math.ceil(fastest + this.replyNs(batchSamples)));
  }

  /**
   * The queued requests (of those `sheddable`) that the batch forming now for the free instance would
   * finish after their deadlines: the batch is the first max_batch_size samples of `queue` in serving
   * order, its latency counted as expectedLatencyNs counts it (its run, its replies, and the event
   * loop's lag twice). Those found late leave it, the rest are weighed again with the samples behind
   * them, until none is. The last request of the queue is never among them: a profile that a slow run
   * set too high would otherwise refuse every request, and no run would correct it.
   */
  lateInBatch<T extends { readonly request: QueuedRequest }>(
    queue: Iterable<T>,
    nowNs: bigint,
    instance: number,
    lagNs: number,
    sheddable: (waiting: T) => boolean,
  ): T[] {
    const late = new Set<T>();
    for (;;) {
      const batch: T[] = [];
      let samples = 0;
      let more = false;
      for (const waiting of queue) {
        if (late.has(waiting)) continue;
        if (samples + waiting.request.batchSize > this.maxBatchSize && samples > 0) {
          more = true;
          break;
        }
        batch.push(waiting);
        samples += waiting.request.batchSize;
      }
      const runNs = samples > 0 ? this.expectedRunNs(instance, samples) : undefined;
      if (runNs === undefined) return [...late];
      const endNs = nowNs + BigInt(Math.ceil(runNs + this.replyNs(samples) + 2 * lagNs));
      let found = 0;
      for (const waiting of batch) {
        if (waiting.request.arrivalNs + this.objectiveNs >= endNs || !sheddable(waiting)) continue;
        if (!more && found === batch.length - 1) break; // the queue's last request stays
        late.add(waiting);
        found++;
      }
      if (found === 0) return [...late];
    }
  }

  /** The batch a request of `samples` queued behind `samplesAhead` joins, in samples (the queue drains in full batches). */
  joinedBatchSamples(samplesAhead: number, samples: number): number {
    const total = samplesAhead + samples;
    return total - Math.floor((total - 1) / this.maxBatchSize) * this.maxBatchSize;
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
            reply_ms_per_sample: this.replies.nsPerSample / 1e6,
            by_batch_size: fit.bySize.map(({ batchSize, ns }) => ({ batch_size: batchSize, ms: ns / 1e6 })),
          },
        ];
      }),
    };
  }
}

/** The arrival of the request holding sample `index` (from 0) of `queue`, in serving order. */
function arrivalAtSample(queue: Iterable<{ readonly request: QueuedRequest }>, index: number): bigint | undefined {
  let seen = 0;
  for (const { request } of queue) {
    seen += request.batchSize;
    if (seen > index) return request.arrivalNs;
  }
  return undefined;
}
