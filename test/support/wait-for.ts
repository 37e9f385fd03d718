/** Polls `check` every 100 ms; returns how long it took, throws after `timeoutMs`. */
export async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    if (await check()) return Date.now() - started;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} not met within ${timeoutMs} ms`);
}
