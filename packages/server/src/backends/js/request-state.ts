/**
 * What a JavaScript model's worker knows of each request it works on: its AbortSignal, aborted when
 * the main thread ends the request (its client cancelled it, or a decoupled request's timeout), and in
 * a decoupled model its response sender. The sender posts each response to the main thread and, past
 * MAX_UNSENT_RESPONSES not yet taken for sending, makes the model wait (backpressure). Runs in the worker.
 */
import { ResponseSenderError, type ModelRequest, type ModelResponse, type ResponseSender, type Tensor } from '@batchwise/backend';
import { MAX_UNSENT_RESPONSES, type ByteTensor } from './protocol.ts';

/** A response in the server's byte layout, or its error. */
export type ByteResponse = { readonly outputs: ByteTensor[] } | { readonly error: { readonly message: string; readonly code?: string } };

interface State {
  readonly key: number;
  /** Made when model code first reads the request's signal: most never do, and an AbortController costs each request. */
  controller: AbortController | undefined;
  /** Why the main thread ended the request (its signal's reason). */
  endedBy: ResponseSenderError | undefined;
  readonly id: string | undefined;
  /** Why later sends fail: the final response went, or the main thread ended the request. */
  closedBy: ResponseSenderError | undefined;
  /** Responses posted and not yet acknowledged. */
  unsent: number;
  /** Sends waiting for an acknowledgement. */
  readonly waiting: { resolve(): void; reject(error: Error): void }[];
}

/** Each request's signal, once model code read it, and its key. */
const keyOfSignal = new WeakMap<AbortSignal, number>();

/** The key of the request `signal` belongs to, when it is a request's own signal. */
export function requestKeyOf(signal: AbortSignal): number | undefined {
  return keyOfSignal.get(signal);
}

export class RequestStates {
  private readonly states = new Map<number, State>();

  constructor(
    private readonly modelName: string,
    private readonly decoupled: boolean,
    /** A response as model code gave it, in the byte layout (or the error it amounts to). */
    private readonly convert: (response: unknown, index: number) => ByteResponse,
    /** Posts one response (undefined: the final flag alone) to the main thread. */
    private readonly post: (key: number, response: ByteResponse | undefined, final: boolean) => void,
  ) {}

  /** A send refused because its request is over, or a call cancelled with it: the worker does not stop for it unawaited. */
  static isEndOfRequest(reason: unknown): boolean {
    const error = reason as { name?: unknown; code?: unknown } | null;
    return error?.name === 'ResponseSenderError' || (error?.name === 'ModelCallError' && error.code === 'CANCELLED');
  }

  /** A request of the batch as model code sees it: its own fields, its signal, and its sender in a decoupled model. */
  open(key: number, fields: RequestFields): ModelRequest {
    const state: State = { key, controller: undefined, endedBy: undefined, id: fields.id, closedBy: undefined, unsent: 0, waiting: [] };
    this.states.set(key, state);
    return new OpenRequest(fields, state, this.decoupled ? this.sender(key, state) : undefined);
  }

  /** A request of a model that is not decoupled: its batch returned. */
  close(key: number): void {
    this.states.delete(key);
  }

  /** The main thread ended the request: its signal aborts, waiting and later sends fail with why. */
  end(key: number, code: string, message: string): void {
    const state = this.states.get(key);
    if (!state) return;
    this.states.delete(key);
    const why = new ResponseSenderError(
      `cannot send a response for ${this.describe(state)}: ${message}`,
      code === 'CANCELLED' ? 'CANCELLED' : 'UNAVAILABLE',
    );
    state.closedBy = why;
    state.endedBy = why;
    for (const waiter of state.waiting.splice(0)) waiter.reject(why);
    state.controller?.abort(why);
  }

  /** `count` responses of the request were taken for sending: as many waiting sends go on. */
  ack(key: number, count: number): void {
    const state = this.states.get(key);
    if (!state) return;
    state.unsent -= count;
    for (const waiter of state.waiting.splice(0, count)) waiter.resolve();
  }

  private describe(state: State): string {
    return `request${state.id ? ` '${state.id}'` : ''} of model '${this.modelName}'`;
  }

  private sender(key: number, state: State): ResponseSender {
    let sent = 0;
    return {
      send: (response?: ModelResponse | Error, options?: { readonly final?: boolean }) => {
        if (state.closedBy) return Promise.reject(state.closedBy);
        const final = options?.final === true;
        if (response === undefined && !final) {
          return Promise.reject(
            new ResponseSenderError(`${this.describe(state)}: send() needs a response, or { final: true } to end the request without one`),
          );
        }
        const converted = response === undefined ? undefined : this.convert(response, sent);
        sent++;
        this.post(key, converted, final);
        if (final) {
          state.closedBy = new ResponseSenderError(
            `cannot send a response for ${this.describe(state)}: its final response was already sent`,
          );
          this.states.delete(key);
          return Promise.resolve();
        }
        state.unsent++;
        if (state.unsent < MAX_UNSENT_RESPONSES) return Promise.resolve();
        return new Promise<void>((resolve, reject) => state.waiting.push({ resolve, reject }));
      },
      isCancelled: () => state.endedBy !== undefined,
      get closed() {
        return state.closedBy !== undefined;
      },
    };
  }
}

/** What model code sees of a request besides its signal and sender. */
export interface RequestFields {
  readonly id?: string;
  readonly inputs: Readonly<Record<string, Tensor>>;
  readonly requestedOutputs: readonly string[];
  readonly parameters: Readonly<Record<string, string | number | boolean>>;
}

/** A request handed to model code; `signal` is made on first read, already aborted if the request has ended. */
class OpenRequest implements ModelRequest {
  readonly id?: string;
  readonly inputs: Readonly<Record<string, Tensor>>;
  readonly requestedOutputs: readonly string[];
  readonly parameters: Readonly<Record<string, string | number | boolean>>;
  readonly responseSender?: ResponseSender;
  readonly #state: State;

  constructor(fields: RequestFields, state: State, responseSender: ResponseSender | undefined) {
    if (fields.id !== undefined) this.id = fields.id;
    this.inputs = fields.inputs;
    this.requestedOutputs = fields.requestedOutputs;
    this.parameters = fields.parameters;
    if (responseSender) this.responseSender = responseSender;
    this.#state = state;
  }

  get signal(): AbortSignal {
    const state = this.#state;
    if (!state.controller) {
      state.controller = new AbortController();
      keyOfSignal.set(state.controller.signal, state.key);
      if (state.endedBy) state.controller.abort(state.endedBy);
    }
    return state.controller.signal;
  }
}
