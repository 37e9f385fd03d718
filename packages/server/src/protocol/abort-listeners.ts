/**
 * Abort listeners at the cost of a Set (issue 34). Node's EventTarget spends microseconds on each
 * addEventListener/removeEventListener pair, and every queued request and every request a
 * JavaScript model works on listens to its signal while it is in flight. A signal made by
 * `listenedAbortController()` (an HTTP connection's, the calls of a JavaScript model's request)
 * keeps such listeners in a Set that one event listener of its own calls; any other AbortSignal
 * (a gRPC call's, a deadline's) gets plain event listeners. As with addEventListener, a listener
 * added after the abort is never called: check `signal.aborted` first.
 */
export interface AbortListener {
  handleEvent(): void;
}

const listenersOf = new WeakMap<AbortSignal, Set<AbortListener>>();
const ONCE = { once: true } as const;

/** An AbortController whose signal's listeners added by `onAbort` cost a Set entry each. */
export function listenedAbortController(): AbortController {
  const controller = new AbortController();
  const listeners = new Set<AbortListener>();
  listenersOf.set(controller.signal, listeners);
  controller.signal.addEventListener(
    'abort',
    () => {
      // As EventTarget does: those held at the abort, less any a listener takes off meanwhile.
      for (const listener of [...listeners]) if (listeners.delete(listener)) listener.handleEvent();
    },
    ONCE,
  );
  return controller;
}

/** Calls `listener` once when `signal` aborts. */
export function onAbort(signal: AbortSignal, listener: AbortListener): void {
  const listeners = listenersOf.get(signal);
  if (listeners) listeners.add(listener);
  else signal.addEventListener('abort', listener, ONCE);
}

/** Undoes `onAbort`. */
export function offAbort(signal: AbortSignal, listener: AbortListener): void {
  const listeners = listenersOf.get(signal);
  if (listeners) listeners.delete(listener);
  else signal.removeEventListener('abort', listener);
}

/** Whether a listener added by `onAbort` still waits on a signal made by `listenedAbortController()`. */
export function hasAbortListeners(signal: AbortSignal): boolean {
  return (listenersOf.get(signal)?.size ?? 0) > 0;
}
