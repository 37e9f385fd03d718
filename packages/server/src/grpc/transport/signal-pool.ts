import { hasAbortListeners, listenedAbortController } from '../../protocol/abort-listeners.ts';

/**
 * AbortControllers for calls, reused. Making an AbortSignal costs about 5 us on Node 20 (measured on
 * these machines: more than decoding a ModelInferRequest; about 0.3 us on Node 22), and every
 * ModelInfer call needs one while its request is in flight, though almost none is ever aborted. A
 * call that ends without being cancelled gives its controller back, unless something still listens on
 * its signal; the next call takes it. As with the HTTP frontend's signal per connection
 * (http/connection-cancel.ts), a signal then serves requests one after another, never two at once.
 */
const pool: AbortController[] = [];
const MAX_POOLED = 1024;

export function takeAbortController(): AbortController {
  return pool.pop() ?? listenedAbortController();
}

/** Gives back a call's controller once the call has ended; one aborted or still listened to is dropped. */
export function giveBackAbortController(controller: AbortController): void {
  const signal = controller.signal;
  if (!signal.aborted && !hasAbortListeners(signal) && pool.length < MAX_POOLED) pool.push(controller);
}
