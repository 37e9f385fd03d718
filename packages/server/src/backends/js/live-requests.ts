import type { Worker } from 'node:worker_threads';
import { Errors, toInferenceServerError } from '../../errors/errors.ts';
import type { InstanceRequest, StreamEnd, StreamedResponse } from '../backend.ts';
import { ACK_EVERY, type ToWorker } from './protocol.ts';
import { listenedAbortController, offAbort, onAbort } from '../../protocol/abort-listeners.ts';

/** Per-model parameter: milliseconds a decoupled request may stay open after its batch started before it ends with an error. */
export const FINAL_RESPONSE_TIMEOUT_PARAMETER = 'batchwise_final_response_timeout_ms';
export const DEFAULT_FINAL_RESPONSE_TIMEOUT_MS = 300_000;

/** A request the worker is working on; it is its own abort listener (no closure per request). */
class Live<W> {
  constructor(
    readonly key: number,
    readonly request: InstanceRequest,
    /** The worker that runs it: what the main thread tells about it goes there. */
    readonly worker: W,
    private readonly owner: LiveRequests<W>,
    /** A decoupled request: its final-response timeout and how it ended. */
    readonly stream?: { readonly timer: NodeJS.Timeout; readonly end: (end: StreamEnd) => void },
  ) {}

  /** A decoupled request's responses taken for sending and not yet acknowledged to the worker. */
  unacknowledged = 0;
  /** Cancels the calls model code made with the request's signal, when the request ends before its model is done. */
  calls: AbortController | undefined;

  handleEvent(): void {
    this.owner.end(this.key, Errors.cancelled());
  }
}

/**
 * The requests a JavaScript model instance's worker is working on, by the instance's key for each:
 * a cancelled one is ended in the worker (its signal aborts, its sends fail), and a decoupled one's
 * responses go to its sink, acknowledged to the worker ACK_EVERY at a time as they are taken for sending, until its final
 * response, its timeout, its cancellation or its instance's failure ends it.
 */
/** What the instance tells its worker about a request: it ended, or more of its responses were taken. */
export type RequestNotice = Extract<ToWorker, { type: 'end' | 'ack' }>;

export class LiveRequests<W = Worker> {
  private readonly live = new Map<number, Live<W>>();

  constructor(
    private readonly modelName: string,
    private readonly finalResponseTimeoutMs: number,
    /** Posts to `worker` if it is still the instance's (a replaced worker has nobody to tell). */
    private readonly tell: (worker: W, message: RequestNotice) => void,
  ) {}

  /** A request sent to `worker`; for a decoupled one (it has a sink), resolves when it ends. */
  add(key: number, request: InstanceRequest, worker: W): Promise<StreamEnd> | undefined {
    if (!request.responses) {
      const live = new Live(key, request, worker, this);
      this.live.set(key, live);
      if (request.signal) onAbort(request.signal, live);
      return undefined;
    }
    return new Promise<StreamEnd>((end) => {
      const timer = setTimeout(
        () =>
          this.end(
            key,
            Errors.internal(
              `model '${this.modelName}': ${describe(request)} sent no final response within ${this.finalResponseTimeoutMs} ms ` +
                `(parameter ${FINAL_RESPONSE_TIMEOUT_PARAMETER}); it was ended`,
            ),
          ),
        this.finalResponseTimeoutMs,
      );
      const live = new Live(key, request, worker, this, { timer, end });
      this.live.set(key, live);
      if (request.signal) onAbort(request.signal, live);
    });
  }

  /** Whether the request is still open (not ended, for a decoupled one not finished). */
  has(key: number): boolean {
    return this.live.has(key);
  }

  /** The request of `key` (the outputs it asked for, its batch size), while it is live. */
  requestOf(key: number): InstanceRequest | undefined {
    return this.live.get(key)?.request;
  }

  /**
   * The signal of the calls model code makes with the request's own signal: one for all of them,
   * aborted when the request ends unfinished. Undefined once the request is over.
   */
  callSignal(key: number): AbortSignal | undefined {
    const live = this.live.get(key);
    if (!live) return undefined;
    live.calls ??= listenedAbortController();
    return live.calls.signal;
  }

  /** A response the model sent for a decoupled request; the final one ends it. */
  response(key: number, response: StreamedResponse | undefined, final: boolean): void {
    const live = this.live.get(key);
    if (!live?.stream) return; // ended already (its timeout, its cancellation, a response it could not hold): sent too late
    let taken: Promise<void>;
    try {
      taken = live.request.responses!.send(response, final);
    } catch (error) {
      // The response could not be held (the memory budget): the request ends with why, final or not,
      // and whatever its model sends after it (its final flag among them) finds it ended.
      this.end(key, toInferenceServerError(error));
      return;
    }
    if (final) {
      this.forget(key, live);
      live.stream.end(response && 'error' in response ? { sentError: response.error } : {});
      return;
    }
    void taken.then(() => {
      if (this.live.get(key) !== live || ++live.unacknowledged < ACK_EVERY) return;
      live.unacknowledged = 0;
      this.tell(live.worker, { type: 'ack', key, count: ACK_EVERY });
    });
  }

  /** A request whose batch returned (a model that is not decoupled): nothing more to follow. */
  done(key: number): void {
    const live = this.live.get(key);
    if (live) this.forget(key, live);
  }

  /** Ends a request the model did not finish: the worker is told (its signal aborts), a decoupled one ends with `error`. */
  end(key: number, error: Error): void {
    const live = this.live.get(key);
    if (!live) return;
    this.forget(key, live);
    const e = toInferenceServerError(error);
    live.calls?.abort(e);
    this.tell(live.worker, { type: 'end', key, code: e.code, message: e.message });
    live.stream?.end({ error: e });
  }

  /** Every request `worker` (or, without one, any worker) was working on ends with `error`: it died, overran its execute timeout, or closed. */
  endAllOf(worker: W | undefined, error: Error): void {
    for (const [key, live] of this.live) if (worker === undefined || live.worker === worker) this.end(key, error);
  }

  private forget(key: number, live: Live<W>): void {
    this.live.delete(key);
    if (live.request.signal) offAbort(live.request.signal, live);
    if (live.stream) clearTimeout(live.stream.timer);
  }
}

function describe(request: InstanceRequest): string {
  return request.id ? `request '${request.id}'` : 'a request';
}
