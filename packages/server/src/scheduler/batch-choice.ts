import type { BatchingOptions } from './batching-options.ts';
import type { QueuedRequest } from './scheduler.ts';

/** Send the first `count` requests of the queue now, or look again after `waitNs`. */
export type BatchChoice = { readonly count: number } | { readonly waitNs: bigint };

type Rule = Pick<BatchingOptions, 'maxBatchSize' | 'preferredBatchSizes' | 'maxPreferredBatchSize' | 'maxQueueDelayNs'>;

/**
 * Triton's dynamic batch choice (DynamicBatchScheduler::GetDynamicBatch) over the queue in
 * serving order. Requests join whole and in order; the walk stops at the first request that
 * would pass max_batch_size or whose inputs differ from the first's. Then, in this order:
 * the largest preferred size reached goes at once (unless the delay has passed); failing
 * that, the prefix just below the largest preferred size when the queue holds more; a batch
 * that cannot grow goes at once; after max_queue_delay from the oldest request, or with no
 * delay configured, what there is goes; otherwise wait for the delay to run out (or not at
 * all when `expectedArrivalGapNs`, the adaptive delay's estimate, says nobody will come in time).
 */
export function chooseBatch(
  queue: Iterable<{ readonly request: QueuedRequest }>,
  rule: Rule,
  nowNs: bigint,
  expectedArrivalGapNs?: bigint,
): BatchChoice {
  const { maxBatchSize, preferredBatchSizes, maxPreferredBatchSize, maxQueueDelayNs } = rule;
  let first: QueuedRequest | undefined;
  let samples = 0;
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
      if (samples + size > maxBatchSize || !sameInputShapes(first, request)) {
        cannotGrow = true;
        break;
      }
    }
    samples += size;
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
  // Adaptive delay: "at most" max_queue_delay. When the next request is not expected before
  // the delay ends (a lone client, light traffic), waiting only adds latency.
  if (expectedArrivalGapNs !== undefined && expectedArrivalGapNs > waitNs) return { count };
  return { waitNs };
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
