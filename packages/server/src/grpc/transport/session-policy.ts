import { constants, type ServerHttp2Session } from 'node:http2';
import { MAX_TIMER_MS } from './grpc-timeout.ts';

export interface SessionPolicy {
  /** Interval of the server's keepalive pings, ms, idle connections included; 0 or beyond a timer's range: none. */
  readonly keepaliveTimeMs: number;
  /** How long a ping may go unanswered before the connection is closed, ms. */
  readonly keepaliveTimeoutMs: number;
  /** Connections are sent GOAWAY at this age (give or take 10%, so clients do not all reconnect at once). @default unlimited */
  readonly maxConnectionAgeMs?: number;
  /** Time calls in flight get after that GOAWAY before the connection is closed. @default unlimited */
  readonly maxConnectionAgeGraceMs?: number;
}

/**
 * What the server does to each connection over its life, as grpc-js's server does it: a keepalive
 * ping every keepaliveTimeMs (the next one once the last is answered), the connection destroyed when
 * one goes unanswered for keepaliveTimeoutMs; at max age GOAWAY (last stream id 2^31-1, so calls
 * already sent still run), then a graceful close, forced after the grace. Client pings are answered by
 * Node's HTTP/2 itself. Returns what stops the timers (called when the session closes).
 */
export function applySessionPolicy(session: ServerHttp2Session, policy: SessionPolicy): () => void {
  let keepalive: NodeJS.Timeout | undefined;
  let age: NodeJS.Timeout | undefined;
  let grace: NodeJS.Timeout | undefined;

  const pings = policy.keepaliveTimeMs > 0 && policy.keepaliveTimeMs <= MAX_TIMER_MS;
  const schedulePing = () => {
    keepalive = setTimeout(ping, policy.keepaliveTimeMs);
    keepalive.unref();
  };
  const ping = () => {
    if (session.destroyed || session.closed) return;
    let sent = false;
    try {
      sent = session.ping((error) => {
        clearTimeout(keepalive);
        if (error) session.destroy();
        else schedulePing();
      });
    } catch {
      sent = false;
    }
    if (!sent) return session.destroy();
    keepalive = setTimeout(() => session.destroy(), Math.min(policy.keepaliveTimeoutMs, MAX_TIMER_MS));
    keepalive.unref();
  };
  if (pings) schedulePing();

  const maxAge = policy.maxConnectionAgeMs;
  if (maxAge !== undefined && maxAge <= MAX_TIMER_MS) {
    const jitter = (Math.random() * 2 - 1) * (maxAge / 10);
    age = setTimeout(
      () => {
        if (session.destroyed || session.closed) return;
        try {
          session.goaway(constants.NGHTTP2_NO_ERROR, 2 ** 31 - 1, Buffer.from('max_age'));
        } catch {
          return session.destroy();
        }
        session.close();
        const graceMs = policy.maxConnectionAgeGraceMs;
        if (graceMs !== undefined && graceMs <= MAX_TIMER_MS) {
          grace = setTimeout(() => session.destroy(), graceMs);
          grace.unref();
        }
      },
      Math.max(0, maxAge + jitter),
    );
    age.unref();
  }

  return () => {
    clearTimeout(keepalive);
    clearTimeout(age);
    clearTimeout(grace);
  };
}
