import type { ObjectiveRefusal } from '../scheduler/scheduler.ts';
import { systemClock } from '../scheduler/clock.ts';
import { RefusalTimer } from '../scheduler/refusal-timer.ts';

/** The frontends' held refusals, every model's, on one timer (refusal-timer.ts). */
const held = new RefusalTimer(systemClock);

/**
 * Resolves when a latency-objective refusal is due (ObjectiveRefusal.answerAtNs), never before it
 * and up to about a millisecond after (RefusalTimer); undefined when it is due already, so that the
 * frontend answers in the same turn. Node's setTimeout alone fires up to a millisecond early
 * (setTimeout(1.98) measured 1.1 ms): a refusal held two objectives of 1 ms came back after one and
 * a half.
 */
export function refusalDue(refusal: ObjectiveRefusal): Promise<void> | undefined {
  if (refusal.answerAtNs <= systemClock.nowNs()) return undefined;
  return new Promise((resolve) => held.at(refusal.answerAtNs, resolve));
}
