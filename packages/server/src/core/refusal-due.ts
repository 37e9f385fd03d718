import type { ObjectiveRefusal } from '../scheduler/scheduler.ts';

/**
 * Resolves when a latency-objective refusal is due (ObjectiveRefusal.answerAtNs); undefined when it
 * is due already, so that the frontend answers in the same turn.
 */
export function refusalDue(refusal: ObjectiveRefusal): Promise<void> | undefined {
  const dueMs = Number(refusal.answerAtNs - process.hrtime.bigint()) / 1e6;
  return dueMs > 0 ? new Promise((resolve) => setTimeout(resolve, dueMs)) : undefined;
}
