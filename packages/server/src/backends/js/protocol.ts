/**
 * Messages between the main thread and a JavaScript model's worker thread; both sides import
 * this file. Each message's tensors travel packed in one buffer that is transferred, never
 * copied by structured clone: a tensor is a slice of it (packTensors).
 */
import type { InitializeArgs } from '@batchwise/backend';
import type { DataType } from '../../tensor/datatype.ts';
import type { Parameters } from '../../tensor/tensor.ts';
import type { ExecutionTimings } from '../backend.ts';

export interface WorkerInit {
  /** The model file (model.mjs, model.js or default_model_filename). */
  readonly modelFile: string;
  /** model_transaction_policy { decoupled: true }: each request gets a response sender. */
  readonly decoupled: boolean;
  /** What `initialize(args)` receives. */
  readonly args: InitializeArgs;
  /** The shared memory of the worker's parked channel (parked-channel.ts). */
  readonly channel?: SharedArrayBuffer;
}

/** A tensor whose bytes (the server's layout: BYTES length-prefixed) are `byteLength` bytes at `offset` of the message's buffer. */
export interface WireSlice {
  readonly name: string;
  readonly datatype: DataType;
  readonly shape: readonly number[];
  readonly offset: number;
  readonly byteLength: number;
}

export interface WireRequest {
  /** The instance's number for the request, which its responses, acknowledgements and cancellation name. */
  readonly key: number;
  readonly id?: string;
  readonly inputs: readonly WireSlice[];
  readonly outputNames: readonly string[];
  readonly parameters: Parameters;
}

export type WireResponse =
  { readonly outputs: readonly WireSlice[] } | { readonly error: { readonly message: string; readonly code?: string } };

/** A call from model code to another model (inferModel). */
export interface WireCall {
  readonly model: string;
  readonly version?: string;
  readonly inputs: readonly WireSlice[];
  readonly outputs?: readonly string[];
  readonly parameters?: Parameters;
}

export type ToWorker =
  | { readonly type: 'execute'; readonly id: number; readonly buffer: ArrayBuffer; readonly requests: Packed<WireRequest> }
  | {
      readonly type: 'call-result';
      readonly callId: number;
      readonly model: string;
      readonly version: string;
      readonly buffer: ArrayBuffer;
      readonly outputs: readonly WireSlice[];
    }
  /** One response of a streamed call (inferModelStream); `final` with its last. */
  | {
      readonly type: 'call-response';
      readonly callId: number;
      readonly model: string;
      readonly version: string;
      readonly buffer: ArrayBuffer;
      readonly outputs: readonly WireSlice[];
      /** The called model's response parameters (a Python model's), when it set any. */
      readonly parameters?: Parameters;
      readonly final: boolean;
    }
  /** A streamed call's final flag alone (the called model ended its request without a last response). */
  | { readonly type: 'call-end'; readonly callId: number }
  | { readonly type: 'call-failed'; readonly callId: number; readonly code: string; readonly message: string }
  /** The request ended before its model finished with it (cancelled, or a decoupled request's timeout): abort its signal, close its sender. */
  | { readonly type: 'end'; readonly key: number; readonly code: string; readonly message: string }
  /** `count` more responses of the request were taken for sending. */
  | { readonly type: 'ack'; readonly key: number; readonly count: number }
  | { readonly type: 'close' };

export type FromWorker =
  | { readonly type: 'loaded' }
  | { readonly type: 'load-failed'; readonly message: string }
  | {
      readonly type: 'executed';
      readonly id: number;
      readonly buffer: ArrayBuffer;
      readonly responses: Packed<WireResponse>;
      readonly timings: ExecutionTimings;
    }
  | { readonly type: 'execute-failed'; readonly id: number; readonly message: string }
  | {
      readonly type: 'call';
      readonly callId: number;
      /** The execute() during which model code made the call, if any. */
      readonly executeId?: number;
      /**
       * The request whose signal the call was given, if it was one: the main thread cancels the call with
       * that request, and no call-cancel follows. A call given another signal is cancelled by call-cancel.
       */
      readonly requestKey?: number;
      readonly buffer: ArrayBuffer;
      readonly request: WireCall;
      /** inferModelStream: every response of the called model, as it sends them (else its one answer). */
      readonly stream?: true;
    }
  /** Model code took `count` more responses of a streamed call: the server may send as many more. */
  | { readonly type: 'call-ack'; readonly callId: number; readonly count: number }
  /** Model code cancelled a call (its signal aborted): the server cancels it too. */
  | { readonly type: 'call-cancel'; readonly callId: number }
  /** A decoupled request's response (absent: the final flag alone), sent through its response sender. */
  | {
      readonly type: 'response';
      readonly key: number;
      readonly buffer: ArrayBuffer;
      readonly response?: WireResponse;
      readonly final: boolean;
    };

/**
 * Responses of one decoupled request sent and not yet taken for sending, at most: a sender's send()
 * past them waits for an acknowledgement, so a slow reader holds back the model, not the server's memory.
 */
export const MAX_UNSENT_RESPONSES = 8;

/**
 * Responses the main thread takes before it acknowledges them, in one message: a message each costs
 * the worker a wake-up per token. Half the window, so a model whose reader keeps up never waits.
 */
export const ACK_EVERY = MAX_UNSENT_RESPONSES / 2;

/** A tensor in the server's byte layout, ready to pack. */
export interface ByteTensor {
  readonly name: string;
  readonly datatype: DataType;
  readonly shape: readonly number[];
  readonly data: Uint8Array;
}

/** Each tensor starts at a multiple of 8 bytes, so any typed array can view it in place. */
const ALIGN = 8;

/** Copies groups of tensors into one new buffer (one copy per tensor, as batch assembly copies), each a slice of it. */
export function packTensors(groups: readonly (readonly ByteTensor[])[]): { buffer: ArrayBuffer; slices: WireSlice[][] } {
  let bytes = 0;
  for (const group of groups) for (const t of group) bytes = align(bytes) + t.data.byteLength;
  const buffer = new ArrayBuffer(align(bytes));
  const target = new Uint8Array(buffer);
  let offset = 0;
  const slices = groups.map((group) =>
    group.map((t) => {
      offset = align(offset);
      target.set(t.data, offset);
      const slice = { name: t.name, datatype: t.datatype, shape: [...t.shape], offset, byteLength: t.data.byteLength };
      offset += t.data.byteLength;
      return slice;
    }),
  );
  return { buffer, slices };
}

/** The bytes of a slice, as a view on the message's buffer. */
export function sliceBytes(buffer: ArrayBuffer, slice: WireSlice): Uint8Array {
  return new Uint8Array(buffer, slice.offset, slice.byteLength);
}

function align(n: number): number {
  return Math.ceil(n / ALIGN) * ALIGN;
}

/**
 * A batch's requests or responses as JSON text, which crosses to the other thread as one string: a
 * structured clone of their many small objects cost several times what JSON.stringify and parse do
 * (issue 34: 9-13 us against 3-4 us a batch of eight). A list JSON cannot carry exactly (a parameter
 * that is NaN or infinite) crosses as objects.
 */
export type Packed<T> = string | readonly T[];

export function packRequests(requests: readonly WireRequest[]): Packed<WireRequest> {
  for (const r of requests) {
    for (const key in r.parameters) {
      const value = r.parameters[key];
      if (typeof value === 'number' && !Number.isFinite(value)) return requests;
    }
  }
  return JSON.stringify(requests);
}

/** Responses carry names, shapes, offsets and messages only: always JSON. */
export function packResponses(responses: readonly WireResponse[]): Packed<WireResponse> {
  return JSON.stringify(responses);
}

export function unpack<T>(packed: Packed<T>): readonly T[] {
  return typeof packed === 'string' ? (JSON.parse(packed) as T[]) : packed;
}
