import { DirectScheduler } from './direct-scheduler.ts';
import type { Scheduler, SchedulerContext } from './scheduler.ts';

export type { QueuedRequest, Scheduler, SchedulerContext } from './scheduler.ts';

/** The scheduler a model's config asks for. */
export function createScheduler(context: SchedulerContext): Scheduler {
  return new DirectScheduler(context);
}
