import type { ResourceLimit } from './rate-limiter.ts';

/**
 * Triton's `--rate-limit-resource=<name>:<count>[:<device>]` values. Without a device the count
 * is every device's (and the global resource's, when a config names the resource global).
 */
export function parseRateLimitResourceFlags(values: readonly string[]): ResourceLimit[] {
  return values.map((value) => {
    const parts = value.split(':');
    if (parts.length < 2 || parts.length > 3 || parts[0] === '') {
      throw new Error(`--rate-limit-resource must be <name>:<count>[:<device>], got '${value}'`);
    }
    const [name, countText, deviceText] = parts as [string, string, string | undefined];
    const count = wholeNumber(countText);
    if (count === undefined) throw new Error(`--rate-limit-resource '${value}': count '${countText}' must be a whole number >= 0`);
    if (deviceText === undefined) return { name, count };
    const deviceId = wholeNumber(deviceText);
    if (deviceId === undefined) throw new Error(`--rate-limit-resource '${value}': device '${deviceText}' must be a device id >= 0`);
    return { name, count, deviceId };
  });
}

function wholeNumber(text: string): number | undefined {
  if (!/^\d+$/.test(text)) return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : undefined;
}
