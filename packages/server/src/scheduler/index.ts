import { BatchingScheduler } from './batching-scheduler.ts';
import { SequenceScheduler } from './sequence/sequence-scheduler.ts';
import type { Scheduler, SchedulerContext } from './scheduler.ts';

export { latencyObjectiveNs, LATENCY_OBJECTIVE_PARAMETER } from './latency-objective.ts';
export type { QueuedRequest, Scheduler, SchedulerContext, WarmupRun } from './scheduler.ts';

/** The scheduler a model's config asks for: the sequence batcher, dynamic batching, or each request alone. */
export function createScheduler(context: SchedulerContext): Scheduler {
  if (context.config.sequence_batching) return new SequenceScheduler(context);
  return new BatchingScheduler(context);
}
