import { describe, expect, it } from 'vitest';
import { OnDemandLoads, UNLOADED_REASON } from './on-demand-loads.ts';

/** A host whose loads succeed, and whose model reads unready with `after[i]` after the i-th load. */
function hostWith(after: (string | undefined)[]) {
  let loads = 0;
  let state: string | undefined = 'no version is loaded';
  return {
    get loads() {
      return loads;
    },
    load: async () => {
      state = after[loads++];
      return undefined;
    },
    unready: () => state,
    observeWait: () => undefined,
  };
}

describe('OnDemandLoads', () => {
  it('loads again, with no back-off, a model a request unloaded right after its load succeeded', async () => {
    const host = hostWith([UNLOADED_REASON, undefined]);
    const loads = new OnDemandLoads({ timeoutMs: 5000, retryMs: 10_000 }, host);
    await loads.waitFor('m');
    expect(host.loads).toBe(2);
    expect(loads.note('m')).toBeUndefined();
  });

  it('backs off from a model that stays unready after its load for any other reason', async () => {
    const host = hostWith(["step 'pre' is not ready"]);
    const loads = new OnDemandLoads({ timeoutMs: 5000, retryMs: 10_000 }, host);
    await expect(loads.waitFor('m')).rejects.toThrow(/step 'pre' is not ready; load failed at .* tries again/);
    await expect(loads.waitFor('m')).rejects.toThrow(/step 'pre' is not ready/);
    expect(host.loads).toBe(1);
  });
});
