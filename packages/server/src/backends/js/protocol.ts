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
  /** What `initialize(args)` receives. */
  readonly args: InitializeArgs;
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
  | { readonly type: 'execute'; readonly id: number; readonly buffer: ArrayBuffer; readonly requests: readonly WireRequest[] }
  | {
      readonly type: 'call-result';
      readonly callId: number;
      readonly model: string;
      readonly version: string;
      readonly buffer: ArrayBuffer;
      readonly outputs: readonly WireSlice[];
    }
  | { readonly type: 'call-failed'; readonly callId: number; readonly code: string; readonly message: string }
  | { readonly type: 'close' };

export type FromWorker =
  | { readonly type: 'loaded' }
  | { readonly type: 'load-failed'; readonly message: string }
  | {
      readonly type: 'executed';
      readonly id: number;
      readonly buffer: ArrayBuffer;
      readonly responses: readonly WireResponse[];
      readonly timings: ExecutionTimings;
    }
  | { readonly type: 'execute-failed'; readonly id: number; readonly message: string }
  | {
      readonly type: 'call';
      readonly callId: number;
      /** The execute() during which model code made the call, if any. */
      readonly executeId?: number;
      readonly buffer: ArrayBuffer;
      readonly request: WireCall;
    };

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
