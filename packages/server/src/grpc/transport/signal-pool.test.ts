import { describe, expect, it } from 'vitest';
import { offAbort, onAbort } from '../../protocol/abort-listeners.ts';
import { giveBackAbortController, takeAbortController } from './signal-pool.ts';

describe('the pool of calls’ AbortControllers', () => {
  it('gives a controller given back to the next call', () => {
    const first = takeAbortController();
    giveBackAbortController(first);
    expect(takeAbortController()).toBe(first);
  });

  it('never gives out again one that was aborted, or that something still listens on', () => {
    const aborted = takeAbortController();
    aborted.abort();
    giveBackAbortController(aborted);
    expect(takeAbortController()).not.toBe(aborted);

    const listened = takeAbortController();
    const listener = { handleEvent: () => undefined };
    onAbort(listened.signal, listener);
    giveBackAbortController(listened);
    expect(takeAbortController()).not.toBe(listened);

    // Its listener gone, a controller is as good as new.
    const released = takeAbortController();
    onAbort(released.signal, listener);
    offAbort(released.signal, listener);
    giveBackAbortController(released);
    expect(takeAbortController()).toBe(released);
  });

  it('calls the listeners of a pooled signal when its call is cancelled', () => {
    const controller = takeAbortController();
    let called = 0;
    onAbort(controller.signal, { handleEvent: () => called++ });
    controller.abort();
    expect(called).toBe(1);
  });
});
