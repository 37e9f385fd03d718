import type { BatchingOptions } from './batching-options.ts';
import type { QueuedRequest } from './scheduler.ts';

/** Send the first `count` requests of the queue now, or look again after `waitNs`. */
export type BatchChoice = { readonly count: number } | { readonly waitNs: bigint };

type Rule = Pick<BatchingOptions, 'maxBatchSize' | 'preferredBatchSizes' | 'maxPreferredBatchSize' | 'maxQueueDelayNs'> & {
  /** The most JavaScript heap a batch's BYTES strings may take in an instance; a request that would pass it waits for the next batch. */
  readonly maxBatchStringHeapBytes?: number;
};

/** What the adaptive delay knows of the traffic; absent under Triton's strict delay. */
export interface Company {
  /** Mean gap between the model's recent arrivals (arrival-gap.ts); undefined before two. */
  readonly expectedArrivalGapNs: bigint | undefined;
  /** How long the model's last batch ran, dispatch to completion; undefined before the first. */
  readonly lastBatchNs: bigint | undefined;
  /** No instance of the model is executing. */
  readonly idle: boolean;
  /** The most requests the model held at once at its recent arrivals (`populationOf`, recent-window.ts); undefined before enough. */
  readonly population?: number | undefined;
}

/**
 * Triton's dynamic batch choice (DynamicBatchScheduler::GetDynamicBatch) over the queue in
 * serving order. Requests join whole and in order; the walk stops at the first request that
 * would pass max_batch_size (or the instance's room for strings) or whose inputs differ from the
 * first's. Then, in this order:
 * the largest preferred size reached goes at once (unless the delay has passed); failing
 * that, the prefix just below the largest preferred size when the queue holds more; a batch
 * that cannot grow goes at once; after max_queue_delay from the oldest request, or with no
 * delay configured, what there is goes; otherwise wait for the delay to run out, unless the
 * adaptive delay (`company`) finds waiting pointless (see sendWithoutWaiting).
 */
export function chooseBatch(
  queue: Iterable<{ readonly request: QueuedRequest }>,
  rule: Rule,
  nowNs: bigint,
  company?: Company,
): BatchChoice {
  const { maxBatchSize, preferredBatchSizes, maxPreferredBatchSize, maxQueueDelayNs } = rule;
  const maxStringHeapBytes = rule.maxBatchStringHeapBytes ?? Infinity;
  let first: QueuedRequest | undefined;
  let samples = 0;
  let stringHeapBytes = 0;
  let count = 0;
  let best = 0;
  let cannotGrow = false;
  let oldestNs = nowNs;
  for (const { request } of queue) {
    const size = request.batchSize;
    if (first === undefined) {
      first = request;
    } else {
      if (samples + size > maxPreferredBatchSize && best === 0) best = count;
      const strings = stringHeapBytes + (request.stringHeapBytes ?? 0);
      if (samples + size > maxBatchSize || strings > maxStringHeapBytes || !sameInputShapes(first, request)) {
        cannotGrow = true;
        break;
      }
    }
    samples += size;
    stringHeapBytes += request.stringHeapBytes ?? 0;
    count++;
    if (request.arrivalNs < oldestNs) oldestNs = request.arrivalNs;
    if (preferredBatchSizes.has(samples)) best = count;
  }
  if (count === 0) return { count: 0 };
  const waitedNs = nowNs - oldestNs;
  const delayPassed = maxQueueDelayNs > 0n && waitedNs >= maxQueueDelayNs;
  if (best > 0 && !delayPassed) return { count: best };
  if (cannotGrow || samples >= maxPreferredBatchSize || delayPassed || maxQueueDelayNs === 0n) return { count };
  const waitNs = maxQueueDelayNs - waitedNs;
  if (company && sendWithoutWaiting(company, count, waitNs)) return { count };
  return { waitNs };
}

/**
 * The adaptive delay: max_queue_delay read as "at most". Waiting for company only adds
 * latency when
 * - the queue holds as many requests as the model has recently held at once: a closed loop's
 *   whole population is here, and no one else comes before this batch returns. The batch that
 *   would otherwise wait out the delay (or, with a delay shorter than a run, split the clients
 *   into two batches a cycle) goes as the last of them arrives;
 * - the next request is not expected before the delay ends (light traffic), or
 * - a lone request finds the model idle, and requests come further apart than a batch
 *   takes: the instance keeps up running them one by one, so there is no throughput to win.
 *   This spares a lone closed-loop client, whose next request cannot come before this
 *   answer, even when its round trip is shorter than the delay. Under load, requests come
 *   closer together than a batch takes (a burst per returned batch), so batches still form.
 */
function sendWithoutWaiting(company: Company, count: number, waitNs: bigint): boolean {
  const { expectedArrivalGapNs: gapNs, lastBatchNs, idle, population } = company;
  if (population !== undefined && count >= population) return true;
  if (gapNs === undefined) return false;
  if (gapNs > waitNs) return true;
  return count === 1 && idle && lastBatchNs !== undefined && gapNs > lastBatchNs;
}

/**
 * Requests share a batch only when they carry the same inputs (optional ones may be left
 * out) with the same non-batch dims: Triton's behaviour without ragged batching.
 */
export function sameInputShapes(a: QueuedRequest, b: QueuedRequest): boolean {
  if (a.inputs.length !== b.inputs.length) return false;
  for (let i = 0; i < a.inputs.length; i++) {
    const ta = a.inputs[i]!;
    const tb = b.inputs[i]!;
    if (ta.name !== tb.name || ta.shape.length !== tb.shape.length) return false;
    for (let d = 1; d < ta.shape.length; d++) if (ta.shape[d] !== tb.shape[d]) return false;
  }
  return true;
}
