import type { ModelConfig, ModelQueuePolicy } from '../config/model-config.ts';
import { latencyObjectiveNs } from './latency-objective.ts';

/** What the batcher does, decided once from the config at load time. */
export interface BatchingOptions {
  /** false: every request runs alone (no dynamic_batching); true: Triton's dynamic batcher. */
  readonly dynamic: boolean;
  /** Samples per batch; 1 for models without batching. */
  readonly maxBatchSize: number;
  /** Never empty: Triton uses [max_batch_size] when the config lists none. */
  readonly preferredBatchSizes: ReadonlySet<number>;
  readonly maxPreferredBatchSize: number;
  readonly maxQueueDelayNs: bigint;
  /**
   * Send before max_queue_delay when the next request is not expected in time: batching adds
   * no wait when there is nobody to wait for (a lone client, light traffic). On by default;
   * the model parameter `batchwise_adaptive_queue_delay: "false"` restores Triton's semantics
   * (always wait out the delay for a batch that could still grow).
   */
  readonly adaptiveDelay: boolean;
  readonly preserveOrdering: boolean;
  /** batchwise_latency_objective_ms in nanoseconds: batches form from measurements instead of max_queue_delay (objective-choice.ts). */
  readonly latencyObjectiveNs: bigint | undefined;
  /** 0: priorities are not configured and a request's priority is ignored. Otherwise levels 1..n, 1 served first. */
  readonly priorityLevels: number;
  readonly defaultPriorityLevel: number;
  readonly defaultQueuePolicy: ModelQueuePolicy;
  readonly priorityQueuePolicy: ReadonlyMap<number, ModelQueuePolicy>;
}

export function batchingOptionsFromConfig(config: ModelConfig): BatchingOptions {
  const db = config.dynamic_batching;
  const levels = db?.priority_levels ?? 0;
  const maxBatchSize = Math.max(1, config.max_batch_size);
  const preferred = new Set(db?.preferred_batch_size?.length ? db.preferred_batch_size : [maxBatchSize]);
  return {
    dynamic: db !== undefined && config.max_batch_size > 0,
    maxBatchSize,
    preferredBatchSizes: preferred,
    maxPreferredBatchSize: Math.max(...preferred),
    maxQueueDelayNs: BigInt(db?.max_queue_delay_microseconds ?? 0) * 1000n,
    adaptiveDelay: config.parameters?.['batchwise_adaptive_queue_delay']?.string_value.trim().toLowerCase() !== 'false',
    preserveOrdering: db?.preserve_ordering ?? false,
    latencyObjectiveNs: latencyObjectiveNs(config),
    priorityLevels: levels,
    defaultPriorityLevel: levels > 0 ? db?.default_priority_level || levels : 1,
    defaultQueuePolicy: db?.default_queue_policy ?? {},
    priorityQueuePolicy: new Map(Object.entries(db?.priority_queue_policy ?? {}).map(([k, v]) => [Number(k), v])),
  };
}
