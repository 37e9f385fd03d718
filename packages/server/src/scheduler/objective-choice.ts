import { chooseBatch, type BatchChoice } from './batch-choice.ts';
import type { QueuedRequest } from './scheduler.ts';

type Rule = Parameters<typeof chooseBatch>[1];
/** Walked more than once: an array, or an iterable that starts a new walk each time (not a generator). */
type Queue = Iterable<{ readonly request: QueuedRequest }>;

/**
 * Share of the objective the batcher plans with: a batch is formed to finish by 90% of it.
 * The rest absorbs what the plan cannot see: run-time jitter around the profile's mean, the
 * event-loop turn between a batch's end and its replies, and an arrival gap that stretches
 * while the batcher waits on it. Shedding, in contrast, uses the whole objective: a request
 * is refused only when even the estimate says it cannot make it.
 */
export const PLANNING_SHARE = 0.9;

/** A fixed cost under this share of a run is the rounding of a proportional profile, not a cost the profile knows. */
const KNOWN_FIXED_SHARE = 0.01;

/** What the objective batcher knows when an instance is free. */
export interface ObjectiveInputs {
  readonly objectiveNs: number;
  /** Expected run time of a batch on the free instance; undefined before it has run one. */
  readonly expectedRunNs: (batchSize: number) => number | undefined;
  /** Mean gap between recent arrivals; undefined before two, or when arrivals have stopped. */
  readonly arrivalGapNs: number | undefined;
  /** Instances of the model, busy or not. */
  readonly instances: number;
}

export interface ObjectiveChoice {
  readonly choice: BatchChoice;
  /** The batch size the batcher waits for (what it sends, when it sends now). */
  readonly targetBatchSize: number;
  /** How long it waits for more arrivals; 0 when it sends now. */
  readonly waitNs: number;
}

/**
 * The batch for a free instance under a latency objective: the batch that serves the most
 * samples per unit of the instance's time, the wait for its missing samples at the current
 * arrival rate included, among those for which the oldest request still finishes in time
 * (its age, that wait, and the batch's expected run time). A batch's run time grows slower
 * than its size, so that is the largest that fits, unless the samples in hand came in longer
 * than a run's fixed cost: then waiting idles the instance for more than the larger batch
 * saves, and the samples in hand go at once. Triton's rules still shape the
 * batch (chooseBatch: max_batch_size, preferred sizes, same shapes, the order of priorities);
 * only the delay is computed rather than configured. It sends at once when
 * - nothing is known yet (no run time, or fewer than two arrivals),
 * - sending now keeps up: this batch size on every instance serves at least the arrival
 *   rate, so waiting would only add latency (light traffic, a lone client),
 * - no larger batch can finish in time (the wait for company would cost the objective), or
 * - no larger batch serves more samples per unit of time, its wait counted (a backlog under load).
 */
export function chooseForObjective(queue: Queue, rule: Rule, nowNs: bigint, inputs: ObjectiveInputs): ObjectiveChoice {
  const now = chooseBatch(queue, { ...rule, maxQueueDelayNs: 0n }, nowNs);
  if (!('count' in now) || now.count === 0) return { choice: now, targetBatchSize: 0, waitNs: 0 };
  let samples = 0;
  let oldestNs = nowNs;
  let taken = 0;
  for (const { request } of queue) {
    if (taken++ === now.count) break;
    samples += request.batchSize;
    if (request.arrivalNs < oldestNs) oldestNs = request.arrivalNs;
  }
  const sendNow = { choice: now, targetBatchSize: samples, waitNs: 0 };
  const { expectedRunNs, arrivalGapNs: gapNs, instances } = inputs;
  const runNowNs = expectedRunNs(samples);
  if (runNowNs === undefined || gapNs === undefined || samples >= rule.maxBatchSize) return sendNow;
  if (samples * gapNs * instances >= runNowNs) return sendNow;
  const budgetNs = inputs.objectiveNs * PLANNING_SHARE - Number(nowNs - oldestNs);
  // Of the batches that fit the budget, the one that serves the most samples per unit of the instance's
  // time, counting the wait for it: the largest, unless waiting idles the instance for longer than the
  // larger batch saves. Sending the samples in hand at once serves them at runNowNs's rate, and the
  // samples that arrive meanwhile form the next batch (issue 44: at 64 clients waiting for company cost
  // 1-6 ms of p99 and no throughput). A profile that knows no fixed cost (one batch size seen, scaled
  // proportionally) cannot tell what a larger batch saves: the largest that fits goes, and teaches it.
  const byRate = fixedCostNs(expectedRunNs, samples, rule.maxBatchSize) > runNowNs * KNOWN_FIXED_SHARE;
  let target = samples;
  let bestRate = samples / runNowNs;
  for (let b = rule.maxBatchSize; b > samples; b--) {
    const runNs = expectedRunNs(b);
    if (runNs === undefined) continue;
    const takesNs = (b - samples) * gapNs + runNs;
    if (takesNs > budgetNs) continue;
    if (!byRate) {
      target = b;
      break;
    }
    if (b / takesNs > bestRate) {
      target = b;
      bestRate = b / takesNs;
    }
  }
  if (target === samples) return sendNow;
  const waitNs = Math.ceil((target - samples) * gapNs);
  const delayNs = nowNs - oldestNs + BigInt(waitNs);
  const choice = chooseBatch(queue, { ...rule, maxQueueDelayNs: delayNs > 0n ? delayNs : 1n }, nowNs);
  return 'waitNs' in choice ? { choice, targetBatchSize: target, waitNs } : { choice, targetBatchSize: target, waitNs: 0 };
}

/**
 * The run time a batch costs whatever its size, as the profile's estimates at `samples` and at the
 * largest batch imply (the line through both, at zero); 0 when either is unknown or the largest is
 * `samples` itself.
 */
function fixedCostNs(expectedRunNs: ObjectiveInputs['expectedRunNs'], samples: number, maxBatchSize: number): number {
  const small = expectedRunNs(samples);
  const large = expectedRunNs(maxBatchSize);
  if (small === undefined || large === undefined || maxBatchSize <= samples) return 0;
  return (maxBatchSize * small - samples * large) / (maxBatchSize - samples);
}

/** An instance as the admission estimate sees it. */
export interface InstanceOutlook {
  /** Until its running batch is expected to end; 0 when free. */
  readonly busyForNs: number;
  readonly expectedRunNs: (batchSize: number) => number | undefined;
}

/**
 * When a request of `samples` samples, queued behind `samplesAhead`, is expected to finish,
 * from now: the queue is served in full batches (max_batch_size) on whichever instance frees
 * up first. Full batches are the fastest the queue can drain, so a request this estimate
 * finds late is late. Undefined when an instance has no run time yet.
 */
export function expectedFinishNs(
  samplesAhead: number,
  samples: number,
  instances: readonly InstanceOutlook[],
  maxBatchSize: number,
): number | undefined {
  const freeAt = instances.map((i) => i.busyForNs);
  let left = samplesAhead + samples;
  for (;;) {
    let next = 0;
    for (let i = 1; i < freeAt.length; i++) if (freeAt[i]! < freeAt[next]!) next = i;
    const batch = Math.min(left, maxBatchSize);
    const runNs = instances[next]!.expectedRunNs(batch);
    if (runNs === undefined) return undefined;
    freeAt[next]! += runNs;
    left -= batch;
    if (left <= 0) return freeAt[next]!;
  }
}
