/** Milliseconds per unit of `grpc-timeout` (Hours, Minutes, Seconds, milli-, micro-, nanoseconds). */
const MS_PER_UNIT: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000_001 };

const TIMEOUT = /^\s*(\d{1,8})\s*([HMSmun])\s*$/;

/** The longest delay a Node timer takes (2^31 - 1 ms, about 24.8 days); beyond it a call has no deadline. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A `grpc-timeout` header value ("TimeoutValue TimeoutUnit": at most 8 digits and one unit) as
 * milliseconds; undefined when malformed.
 */
export function parseGrpcTimeout(value: string): number | undefined {
  const match = TIMEOUT.exec(value);
  if (match === null) return undefined;
  return Number(match[1]) * MS_PER_UNIT[match[2]!]!;
}
