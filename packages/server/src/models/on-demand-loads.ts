import { Errors } from '../errors/errors.ts';

export interface OnDemandOptions {
  /** How long a request waits for its model to load when it has no timeout of its own, ms (--load-on-demand-timeout-secs). */
  readonly timeoutMs: number;
  /** After a failed load, requests get its error without a new try for this long; doubled by each failure in a row, ms. */
  readonly retryMs: number;
}

/** What the loads ask of the model manager. */
export interface OnDemandHost {
  /** Loads the model from the repository; resolves with why it failed, if it did. */
  load(name: string): Promise<string | undefined>;
  /** Why the model cannot serve a request now (no ready version, a step of it not ready), or undefined when it can. */
  unready(name: string): string | undefined;
  /** How long a request waited for a load, seconds (the metric). */
  observeWait(seconds: number): void;
}

/** The reason a model unloaded by a request (POST .../unload) is unready. */
export const UNLOADED_REASON = 'unloaded';

/** The longest back-off between tries of a model that keeps failing to load. */
export const MAX_RETRY_MS = 10 * 60_000;

interface Failure {
  readonly reason: string;
  readonly failedAt: Date;
  readonly retryAt: number;
  /** The back-off that led to retryAt; the next failure in a row doubles it. */
  readonly retryMs: number;
}

/**
 * --load-on-demand (issue 27): a request for a model of the repository that does not serve starts
 * its load and waits for it. Concurrent requests for one model share one load; a model whose load
 * failed answers with that error at once, and is tried again only by the first request after a
 * back-off (retryMs, doubled by each failure in a row up to 10 minutes). The requests waiting are
 * counted per model, so that the model they wait for is not evicted before they reach its queue.
 */
export class OnDemandLoads {
  private readonly loading = new Map<string, Promise<void>>();
  private readonly failures = new Map<string, Failure>();
  private readonly waiting = new Map<string, number>();

  constructor(
    private readonly options: OnDemandOptions,
    private readonly host: OnDemandHost,
  ) {}

  /** Requests waiting for the model to load. */
  waiters(name: string): number {
    return this.waiting.get(name) ?? 0;
  }

  /** Drops a failed load on record (the model loaded another way, or was unloaded). */
  forget(name: string): void {
    this.failures.delete(name);
  }

  /** For the repository index: when the model's last load failed and when a request tries again. */
  note(name: string): string | undefined {
    const failure = this.failures.get(name);
    if (!failure) return undefined;
    return `load failed at ${failure.failedAt.toISOString()}; the first request after ${new Date(failure.retryAt).toISOString()} tries again`;
  }

  /**
   * Resolves once the model can serve, loading it (or joining the load under way); throws its load
   * error (at once within the back-off), or UNAVAILABLE when it is not loaded within `timeoutMs`.
   */
  async waitFor(name: string, timeoutMs = this.options.timeoutMs): Promise<void> {
    const started = performance.now();
    this.waiting.set(name, this.waiters(name) + 1);
    try {
      // A model evicted again before this request saw it serve is loaded again, within the same deadline.
      while (this.host.unready(name) !== undefined) {
        const failure = this.failures.get(name);
        if (failure && Date.now() < failure.retryAt) {
          throw Errors.modelNotReady(name, `${failure.reason}; ${this.note(name)}`);
        }
        await this.withinDeadline(name, this.loadOnce(name), started + timeoutMs, timeoutMs);
      }
    } finally {
      const left = this.waiters(name) - 1;
      if (left > 0) this.waiting.set(name, left);
      else this.waiting.delete(name);
      this.host.observeWait((performance.now() - started) / 1000);
    }
  }

  private loadOnce(name: string): Promise<void> {
    let load = this.loading.get(name);
    if (load) return load;
    load = this.host
      .load(name)
      .then(
        (failure) => failure ?? this.unreadyAfterLoad(name),
        (error: unknown) => (error instanceof Error ? error.message : String(error)),
      )
      .then((failure) => {
        if (failure === undefined) this.failures.delete(name);
        else this.recordFailure(name, failure);
      })
      .finally(() => this.loading.delete(name));
    this.loading.set(name, load);
    return load;
  }

  /**
   * Why a model whose load succeeded cannot serve: a failure to back off from, unless a request
   * unloaded it meanwhile, which is no fault of the load (the requests waiting load it again).
   */
  private unreadyAfterLoad(name: string): string | undefined {
    const reason = this.host.unready(name);
    return reason === UNLOADED_REASON ? undefined : reason;
  }

  private recordFailure(name: string, reason: string): void {
    const previous = this.failures.get(name);
    const retryMs = previous ? Math.min(MAX_RETRY_MS, previous.retryMs * 2) : this.options.retryMs;
    this.failures.set(name, { reason, failedAt: new Date(), retryAt: Date.now() + retryMs, retryMs });
  }

  private async withinDeadline(name: string, load: Promise<void>, deadline: number, timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            Errors.unavailable(
              `model '${name}' did not load within ${timeoutMs / 1000} s (the request's timeout, or --load-on-demand-timeout-secs); ` +
                'its load goes on for the requests after this one',
            ),
          ),
        Math.max(0, deadline - performance.now()),
      );
    });
    try {
      await Promise.race([load, expired]);
    } finally {
      clearTimeout(timer);
    }
  }
}
