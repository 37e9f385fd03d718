import { describe, expect, it } from 'vitest';
import { listenedAbortController, offAbort, onAbort } from './abort-listeners.ts';

const counter = () => {
  const listener = { calls: 0, handleEvent: () => void listener.calls++ };
  return listener;
};

describe.each([
  ['a listened signal', listenedAbortController],
  ['a plain AbortSignal', () => new AbortController()],
])('onAbort on %s', (_, make) => {
  it('calls each listener once when the signal aborts, and not one taken off', () => {
    const controller = make();
    const [kept, removed] = [counter(), counter()];
    onAbort(controller.signal, kept);
    onAbort(controller.signal, removed);
    offAbort(controller.signal, removed);
    controller.abort();
    controller.abort();
    expect([kept.calls, removed.calls]).toEqual([1, 0]);
  });

  it('never calls a listener added after the abort', () => {
    const controller = make();
    controller.abort();
    const late = counter();
    onAbort(controller.signal, late);
    expect(late.calls).toBe(0);
  });

  it('does not call a listener that another one takes off while they are called', () => {
    const controller = make();
    const second = counter();
    const first = { handleEvent: () => offAbort(controller.signal, second) };
    onAbort(controller.signal, first);
    onAbort(controller.signal, second);
    controller.abort();
    expect(second.calls).toBe(0);
  });
});
