import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { backoffDelayMs, isTransientS3Error, withBackoff } from './backoff.ts';
import { ProgressLog } from './progress.ts';

function capture() {
  const lines: { level: number; msg: string; [k: string]: unknown }[] = [];
  const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { logger, lines };
}

describe('withBackoff', () => {
  it('classifies network, throttling and 5xx errors as transient, access and missing buckets not', () => {
    expect(isTransientS3Error(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBe(true);
    expect(isTransientS3Error({ name: 'AggregateError', errors: [{ code: 'ECONNREFUSED' }] })).toBe(true);
    expect(isTransientS3Error({ name: 'SlowDown', $metadata: { httpStatusCode: 503 } })).toBe(true);
    expect(isTransientS3Error({ name: 'InternalError', $metadata: { httpStatusCode: 500 } })).toBe(true);
    expect(isTransientS3Error(new Error('x', { cause: { code: 'ETIMEDOUT' } }))).toBe(true);
    expect(isTransientS3Error({ name: 'AccessDenied', $metadata: { httpStatusCode: 403 } })).toBe(false);
    expect(isTransientS3Error({ name: 'NoSuchBucket', $metadata: { httpStatusCode: 404 } })).toBe(false);
  });

  it('doubles the delay up to the cap', () => {
    const mid = () => 0.5;
    expect([1, 2, 3, 4, 5, 6, 10].map((a) => backoffDelayMs(a, 1000, 30_000, mid))).toEqual([
      1000, 2000, 4000, 8000, 16_000, 30_000, 30_000,
    ]);
    expect(backoffDelayMs(50, 1000, 30_000, () => 1)).toBe(30_000);
  });

  it('retries transient failures, logs each wait, gives up after maxAttempts', async () => {
    const { logger, lines } = capture();
    let calls = 0;
    const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
    const result = await withBackoff(async () => (++calls < 3 ? Promise.reject(refused()) : 'ok'), {
      logger,
      what: 'listing s3://m/',
      initialDelayMs: 5,
      maxDelayMs: 10,
    });
    expect(result).toBe('ok');
    expect(lines.filter((l) => l.level === 40).map((l) => l.msg)).toEqual([
      expect.stringMatching(/^S3 unreachable, retrying in 0s \(listing s3:\/\/m\/: connect ECONNREFUSED 127\.0\.0\.1:9\)$/),
      expect.stringMatching(/^S3 unreachable, retrying in/),
    ]);
    await expect(withBackoff(() => Promise.reject(refused()), { logger, what: 'x', initialDelayMs: 1, maxAttempts: 2 })).rejects.toThrow(
      /ECONNREFUSED/,
    );
    const abort = new AbortController();
    const pending = withBackoff(() => Promise.reject(refused()), { logger, what: 'x', initialDelayMs: 10_000, signal: abort.signal });
    abort.abort(new Error('shutting down'));
    const started = performance.now();
    await expect(pending).rejects.toThrow('shutting down');
    // Aborted while the attempt was failing: the wait that follows ends at once, not after 10 s.
    expect(performance.now() - started).toBeLessThan(1000);
  });
});

describe('ProgressLog', () => {
  it('logs at most every 10% or every interval, and once at the end', () => {
    const { logger, lines } = capture();
    let now = 0;
    const progress = new ProgressLog({ logger, msg: 'downloading', totalBytes: 1000, now: () => now, fields: { model: 'm' } });
    for (let i = 0; i < 100; i++) progress.add(10); // 100 chunks, no time passes
    progress.finish();
    expect(lines.length).toBe(10); // 10%..90% steps, then done
    expect(lines.at(-1)).toMatchObject({ phase: 'done', bytesDone: 1000, bytesTotal: 1000, percent: 100, model: 'm' });
    lines.length = 0;
    const slow = new ProgressLog({ logger, msg: 'uploading', totalBytes: 1_000_000, now: () => now });
    for (let i = 0; i < 20; i++) {
      now += 500;
      slow.add(100); // far below 10% per chunk: only the clock triggers lines
    }
    expect(lines.length).toBe(10);
  });
});
