import type { Logger } from 'pino';

export interface WaitOptions {
  readonly serverUrl: string;
  readonly model: string;
  readonly version: number;
  readonly logger: Logger;
  /** @default 600 */
  readonly timeoutSeconds?: number;
  /** @default 2 */
  readonly intervalSeconds?: number;
  /**
   * Answers in a row that must report the version: behind a load balancer each answer may
   * come from another task. @default 3
   */
  readonly consecutive?: number;
  /** e.g. { 'batchwise-key': '...' } when the server restricts the metadata API. */
  readonly headers?: Record<string, string>;
}

/**
 * Polls `GET <server>/v2/models/<model>` every `intervalSeconds` until its `versions` (the ready
 * versions) are exactly [version] — the new version serves and the old one has drained —
 * `consecutive` times in a row. Throws on timeout with the last answer seen.
 */
export async function waitForServedVersion(options: WaitOptions): Promise<void> {
  const { model, version, logger, headers = {} } = options;
  const url = `${options.serverUrl.replace(/\/+$/, '')}/v2/models/${encodeURIComponent(model)}`;
  const deadline = Date.now() + (options.timeoutSeconds ?? 600) * 1000;
  const intervalMs = (options.intervalSeconds ?? 2) * 1000;
  const needed = options.consecutive ?? 3;
  let streak = 0;
  let last = 'no answer yet';
  let lastLogged = '';
  /** The last answer listed the new version beside others (the old one still drains). */
  let beside = false;
  logger.info({ url, model, version }, `waiting until the server reports version ${version} of '${model}'`);
  for (;;) {
    try {
      const res = await fetch(url, { headers: { accept: 'application/json', ...headers }, signal: AbortSignal.timeout(10_000) });
      const text = await res.text();
      if (res.ok) {
        const versions = ((JSON.parse(text) as { versions?: unknown[] }).versions ?? []).map(String);
        last = `versions [${versions.join(', ')}]`;
        streak = versions.length === 1 && versions[0] === String(version) ? streak + 1 : 0;
        beside = versions.length > 1 && versions.includes(String(version));
      } else {
        last = `HTTP ${res.status}: ${text.slice(0, 200)}`;
        streak = 0;
        if (res.status === 401 || res.status === 403) {
          throw new Error(`${url} refused the request (${last}); pass --api-key-header and --api-key`);
        }
      }
    } catch (error) {
      if ((error as Error).message.includes('--api-key')) throw error;
      last = `request failed: ${(error as Error).message}`;
      streak = 0;
    }
    if (streak >= needed) {
      logger.info({ model, version }, `server serves version ${version} of '${model}'`);
      return;
    }
    // Each answer that reports the version is said (a few, --wait-interval-secs apart), so that the
    // wait after the first one is not mistaken for slow polling; others only when they change.
    if (streak > 0) {
      logger.info(
        { model, version, seen: last, inARow: streak, needed },
        `server reports version ${version} of '${model}' (${streak} of ${needed} answers in a row)`,
      );
    } else if (last !== lastLogged) {
      logger.info(
        { model, version, seen: last },
        beside ? 'server reports the new version beside others that still serve' : 'server does not report the new version yet',
      );
    }
    lastLogged = last;
    if (Date.now() + intervalMs > deadline) {
      throw new Error(`timed out waiting for ${url} to report only version ${version} (last: ${last})`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
