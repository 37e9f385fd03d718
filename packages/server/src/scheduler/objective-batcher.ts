import type { LatencyObjectiveStatistics } from '../protocol/types.ts';
import { ArrivalGap } from './arrival-gap.ts';
import type { BatchChoice } from './batch-choice.ts';
import { chooseForObjective, expectedFinishNs } from './objective-choice.ts';
import { RunTimeProfile } from './run-time-profile.ts';
import type { QueuedRequest } from './scheduler.ts';

type Rule = Parameters<typeof chooseForObjective>[1];

/**
 * The state behind a model's latency objective: a run-time profile per instance (fed by every
 * batch it runs), the arrival rate, the batches running, and what was last decided, for
 * statistics and metrics. The scheduler asks it for a batch (choose), whether to admit a
 * request (admits), and when a queued request can no longer make it (giveUpAtNs).
 */
export class ObjectiveBatcher {
  private readonly profiles: RunTimeProfile[];
  private readonly arrivals = new ArrivalGap();
  private readonly running: ({ startNs: bigint; samples: number } | undefined)[];
  private lastWaitNs = 0;
  private lastTarget = 0;
  private readonly shed = { admission: 0, queued: 0 };
  readonly objectiveMs: number;

  constructor(
    readonly objectiveNs: bigint,
    instances: number,
    private readonly maxBatchSize: number,
  ) {
    this.profiles = Array.from({ length: instances }, () => new RunTimeProfile());
    this.running = Array.from({ length: instances }, () => undefined);
    this.objectiveMs = Number(objectiveNs) / 1e6;
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

  choose(queue: Iterable<{ readonly request: QueuedRequest }>, rule: Rule, nowNs: bigint, instance: number): BatchChoice {
    const profile = this.profiles[instance]!;
    const decision = chooseForObjective(queue, rule, nowNs, {
      objectiveNs: Number(this.objectiveNs),
      expectedRunNs: (b) => profile.expectedNs(b),
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

  /** A batch ended (run time dispatch to completion); a failed run says nothing of run time. */
  finished(instance: number, nowNs: bigint, succeeded: boolean): void {
    const run = this.running[instance];
    this.running[instance] = undefined;
    if (run && succeeded) this.observeRun(instance, run.samples, Number(nowNs - run.startNs));
  }

  /** A run of `samples` on the instance took `ns`: live batches, and model_warmup's runs before the first. */
  observeRun(instance: number, samples: number, ns: number): void {
    this.profiles[instance]?.observe(samples, ns);
  }

  /**
   * Whether a request of `samples` samples that arrived at `arrivalNs`, queued behind
   * `samplesAhead`, is still expected to finish within the objective. True while any instance
   * has no run time yet: nothing is refused on a guess.
   */
  admits(samplesAhead: number, samples: number, arrivalNs: bigint, nowNs: bigint): boolean {
    const outlook = this.profiles.map((profile, i) => {
      const run = this.running[i];
      const expectedRunNs = (b: number) => profile.expectedNs(b);
      if (!run) return { busyForNs: 0, expectedRunNs };
      const endNs = Number(run.startNs - nowNs) + (profile.expectedNs(run.samples) ?? 0);
      return { busyForNs: Math.max(0, endNs), expectedRunNs };
    });
    const finishNs = expectedFinishNs(samplesAhead, samples, outlook, this.maxBatchSize);
    return finishNs === undefined || Number(nowNs - arrivalNs) + finishNs <= Number(this.objectiveNs);
  }

  /**
   * When a queued request can no longer finish in time even if it ran alone at once on the
   * fastest instance; undefined before every instance has run.
   */
  giveUpAtNs(arrivalNs: bigint, samples: number): bigint | undefined {
    let fastest = Infinity;
    for (const profile of this.profiles) fastest = Math.min(fastest, profile.expectedNs(samples) ?? NaN);
    if (Number.isNaN(fastest)) return undefined;
    return arrivalNs + this.objectiveNs - BigInt(Math.ceil(fastest));
  }

  countShed(where: 'admission' | 'queued'): void {
    this.shed[where]++;
  }

  statistics(nowNs: bigint): LatencyObjectiveStatistics {
    const gap = this.gapNs(nowNs);
    return {
      objective_ms: this.objectiveMs,
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
            by_batch_size: fit.bySize.map(({ batchSize, ns }) => ({ batch_size: batchSize, ms: ns / 1e6 })),
          },
        ];
      }),
    };
  }
}
