/**
 * The cookie the HTTP frontend sets on the replies of requests that name a sequence, so that a load
 * balancer with application-cookie stickiness keeps every request of the sequence on one task (the
 * sequence batcher's state is the task's own). infra's :8000 target group names it
 * (infra/lib/load-balancer.ts). A module without imports, which synth loads directly.
 */
export const SEQUENCE_COOKIE = 'batchwise-sequence';

/** The Set-Cookie value for a request of sequence `id` (its value is the id; the load balancer reads only its presence). */
export function sequenceCookie(id: string | number | bigint): string {
  return `${SEQUENCE_COOKIE}=${encodeURIComponent(String(id))}; Path=/; HttpOnly`;
}
