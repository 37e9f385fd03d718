import type { Logger } from 'pino';

export interface BackoffOptions {
  readonly logger: Logger;
  /** What is being attempted, for the logs: 'listing s3://models/prod/'. */
  readonly what: string;
  /** What each retry's warning says went wrong. @default 'S3 unreachable' */
  readonly failure?: string;
  /** @default 1000 */
  readonly initialDelayMs?: number;
  /** @default 30000 */
  readonly maxDelayMs?: number;
  /** Attempts before giving up (the last error is thrown). @default Infinity */
  readonly maxAttempts?: number;
  /** Which errors are worth retrying. @default isTransientS3Error */
  readonly isRetryable?: (error: unknown) => boolean;
  /** Stops the retries (the wait rejects with the signal's reason). */
  readonly signal?: AbortSignal;
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'ECONNABORTED',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
]);
const TRANSIENT_NAMES = new Set([
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
  'SlowDown',
  'Throttling',
  'ThrottlingException',
  'ServiceUnavailable',
  'InternalError',
  'NetworkingError',
  'CredentialsProviderError',
]);

/**
 * Network failures, timeouts, throttling and 5xx answers: the kind that go away when S3
 * (or the network, or the task role's credentials endpoint) comes back. Access denied,
 * missing buckets and bad requests are not retried: waiting does not fix them.
 */
export function isTransientS3Error(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    const err = e as { code?: unknown; name?: unknown; $metadata?: { httpStatusCode?: number }; cause?: unknown; errors?: unknown[] };
    if (typeof err.code === 'string' && NETWORK_CODES.has(err.code)) return true;
    if (typeof err.name === 'string' && TRANSIENT_NAMES.has(err.name)) return true;
    const status = err.$metadata?.httpStatusCode;
    if (status !== undefined && (status >= 500 || status === 429)) return true;
    if (Array.isArray(err.errors) && err.errors.some((inner) => isTransientS3Error(inner))) return true;
    e = err.cause;
  }
  return false;
}

/** The delay before retry number `attempt` (1-based): doubling from initial, capped, with ±20% jitter. */
export function backoffDelayMs(attempt: number, initialDelayMs: number, maxDelayMs: number, random = Math.random): number {
  const base = Math.min(maxDelayMs, initialDelayMs * 2 ** Math.min(attempt - 1, 30));
  return Math.round(Math.min(maxDelayMs, base * (0.8 + 0.4 * random())));
}

/**
 * Runs `fn` until it succeeds, waiting with capped exponential backoff after each transient
 * failure and logging `S3 unreachable, retrying in Ns` (warn) each time, and one info line
 * when it finally succeeds after failures. For start-up: the server is live while this
 * waits, and becomes ready once it returns. Downloads retry a file through it too.
 */
export async function withBackoff<T>(fn: () => Promise<T>, options: BackoffOptions): Promise<T> {
  const {
    logger,
    what,
    failure = 'S3 unreachable',
    initialDelayMs = 1000,
    maxDelayMs = 30_000,
    maxAttempts = Number.POSITIVE_INFINITY,
    isRetryable = isTransientS3Error,
    signal,
  } = options;
  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    try {
      const result = await fn();
      if (attempt > 1) logger.info({ what, attempts: attempt }, `S3 reachable again: ${what} succeeded after ${attempt} attempts`);
      return result;
    } catch (error) {
      if (!isRetryable(error) || attempt >= maxAttempts) throw error;
      const delayMs = backoffDelayMs(attempt, initialDelayMs, maxDelayMs);
      const seconds = Math.round(delayMs / 100) / 10;
      logger.warn(
        { what, attempt, retryInMs: delayMs, err: describeError(error) },
        `${failure}, retrying in ${seconds}s (${what}: ${describeError(error)})`,
      );
      await sleep(delayMs, signal);
    }
  }
}

export function describeError(error: unknown): string {
  const err = error as { name?: string; code?: string; message?: string; errors?: { message?: string }[] };
  const message = err?.message || err?.errors?.map((e) => e.message).join('; ') || String(error);
  const code = err?.code ?? (err?.name && err.name !== 'Error' ? err.name : undefined);
  return code && !message.includes(code) ? `${code}: ${message}` : message;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  // An abort that came while `fn` was failing has no 'abort' event left to fire: stop now.
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
