import type { ObjectiveRefusal } from '../scheduler/scheduler.ts';
import { systemClock } from '../scheduler/clock.ts';

/**
 * Resolves when a latency-objective refusal is due (ObjectiveRefusal.answerAtNs); undefined when it
 * is due already, so that the frontend answers in the same turn. A precise timer: Node's setTimeout
 * with a fractional delay fires up to a millisecond early (setTimeout(1.98) measured 1.1 ms), so a
 * refusal held two objectives of 1 ms came back after one and a half.
 */
export function refusalDue(refusal: ObjectiveRefusal): Promise<void> | undefined {
  const dueNs = refusal.answerAtNs - process.hrtime.bigint();
  return dueNs > 0n ? new Promise((resolve) => systemClock.setPreciseTimeout(resolve, dueNs)) : undefined;
}
