import type { Logger } from 'pino';

export interface ProgressOptions {
  readonly logger: Logger;
  /** Log message, e.g. 'downloading model'. */
  readonly msg: string;
  readonly totalBytes: number;
  /** Fields added to every progress line (model, version, file, ...). */
  readonly fields?: Record<string, unknown>;
  /** @default 1000 */
  readonly intervalMs?: number;
  /** Clock, for tests. @default Date.now */
  readonly now?: () => number;
}

/**
 * Logs `{bytesDone, bytesTotal, percent}` as bytes arrive: at most once per interval, and
 * at every 10% step, plus once at the end. Never more often than one line per 10% or per
 * second, whichever comes first.
 */
export class ProgressLog {
  private bytesDone = 0;
  private lastLogAt: number;
  private lastDecile = 0;
  private readonly startedAt: number;
  private readonly now: () => number;
  private readonly intervalMs: number;

  constructor(private readonly options: ProgressOptions) {
    this.now = options.now ?? Date.now;
    this.intervalMs = options.intervalMs ?? 1000;
    this.startedAt = this.now();
    this.lastLogAt = this.startedAt;
  }

  get done(): number {
    return this.bytesDone;
  }

  add(bytes: number): void {
    this.bytesDone += bytes;
    const total = this.options.totalBytes;
    const decile = total > 0 ? Math.floor((this.bytesDone / total) * 10) : 10;
    const t = this.now();
    if ((decile > this.lastDecile && this.bytesDone < total) || t - this.lastLogAt >= this.intervalMs) {
      this.lastDecile = decile;
      this.log(t, 'progress');
    }
  }

  /** Takes back bytes of a file attempt that failed and will be retried. */
  subtract(bytes: number): void {
    this.bytesDone -= bytes;
  }

  finish(): void {
    this.log(this.now(), 'done');
  }

  private log(t: number, phase: 'progress' | 'done'): void {
    this.lastLogAt = t;
    const total = this.options.totalBytes;
    const seconds = (t - this.startedAt) / 1000;
    this.options.logger.info(
      {
        ...this.options.fields,
        phase,
        bytesDone: this.bytesDone,
        bytesTotal: total,
        percent: total > 0 ? Math.round((this.bytesDone / total) * 1000) / 10 : 100,
        ...(phase === 'done' && { seconds, bytesPerSecond: seconds > 0 ? Math.round(this.bytesDone / seconds) : undefined }),
      },
      this.options.msg,
    );
  }
}
