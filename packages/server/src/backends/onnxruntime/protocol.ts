/**
 * Messages between the main thread and a model-instance worker. Both sides import this
 * file. Tensor bytes cross by transfer list (never by structured-clone copy): see
 * `transferListOf`.
 */
import type { ModelIO } from '../../config/model-io.ts';
import type { DataType } from '../../tensor/datatype.ts';
import type { ExecutionTimings, InstanceDevice, SessionSettings } from '../backend.ts';

export interface WorkerInit {
  readonly modelPath: string;
  readonly device: InstanceDevice;
  readonly deviceId: number;
  readonly allowCpuFallback: boolean;
  readonly settings: SessionSettings;
}

/** A tensor whose bytes are the whole of `buffer` (so the buffer can be transferred). */
export interface WireTensor {
  readonly name: string;
  readonly datatype: DataType;
  readonly shape: readonly number[];
  readonly buffer: ArrayBuffer;
}

export type ToWorker =
  | { readonly type: 'run'; readonly id: number; readonly inputs: WireTensor[]; readonly outputNames: readonly string[] }
  | { readonly type: 'close' };

export type FromWorker =
  | {
      readonly type: 'loaded';
      readonly io: ModelIO;
      readonly executionProvider: string;
      readonly fallbackReason?: string;
    }
  | { readonly type: 'load-failed'; readonly message: string }
  | { readonly type: 'result'; readonly id: number; readonly outputs: WireTensor[]; readonly timings: ExecutionTimings }
  | { readonly type: 'run-failed'; readonly id: number; readonly message: string };

/** Copies a view into an exact-size buffer of its own, unless it already is one. */
export function ownBuffer(data: Uint8Array): ArrayBuffer {
  if (data.byteOffset === 0 && data.byteLength === data.buffer.byteLength && data.buffer instanceof ArrayBuffer) {
    return data.buffer;
  }
  const copy = new Uint8Array(data.byteLength);
  copy.set(data);
  return copy.buffer;
}

export function transferListOf(tensors: readonly WireTensor[]): ArrayBuffer[] {
  return tensors.map((t) => t.buffer);
}
