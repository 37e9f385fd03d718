/** Time as the scheduler sees it; tests drive a fake one. */
export interface Clock {
  nowNs(): bigint;
  setTimeout(fn: () => void, delayMs: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: Clock = {
  nowNs: () => process.hrtime.bigint(),
  setTimeout: (fn, delayMs) => setTimeout(fn, delayMs),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};
