import { optionParser } from './flags.ts';

const UNIT_MS: Record<string, number> = { us: 0.001, µs: 0.001, ms: 1, s: 1000, m: 60_000, min: 60_000, h: 3_600_000 };

/**
 * A duration flag such as `50ms`, `0.5s`, `10m` or `250us`, in milliseconds. A bare number is
 * refused: `--latency-objective 50` could mean seconds or milliseconds.
 */
export function parseDurationMs(text: string, flag: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-zµ]+)\s*$/i.exec(text);
  const unit = match?.[2]?.toLowerCase();
  const factor = unit !== undefined && Object.hasOwn(UNIT_MS, unit) ? UNIT_MS[unit] : undefined;
  if (!match || factor === undefined || !(Number(match[1]) > 0)) {
    throw new Error(`${flag}: expected a positive duration with a unit (us, ms, s, m, h) such as 50ms, 0.5s or 10m, got '${text}'`);
  }
  return Number(match[1]) * factor;
}

/** The parser of a duration option for commander: `.option('--budget <duration>', '...', durationParser('--budget'))`. */
export function durationParser(flag: string): (value: string) => number {
  return optionParser((value) => parseDurationMs(value, flag));
}

/** `50ms`, `1.5s`, `10m` for reports. */
export function formatDurationMs(ms: number): string {
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms >= 1000) return `${+(ms / 1000).toFixed(3)}s`;
  return `${+ms.toFixed(3)}ms`;
}
