import { BatchwiseClientError } from './errors.ts';
import type { DataType, InputData, OutputData, TypedArray } from './types.ts';

type ArrayCtor = {
  new (length: number): TypedArray;
  new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): TypedArray;
  readonly BYTES_PER_ELEMENT: number;
};

export const ARRAY_OF: Readonly<Record<Exclude<DataType, 'BYTES'>, ArrayCtor>> = {
  BOOL: Uint8Array, UINT8: Uint8Array, UINT16: Uint16Array, UINT32: Uint32Array,
  UINT64: BigUint64Array, INT8: Int8Array, INT16: Int16Array, INT32: Int32Array,
  INT64: BigInt64Array, FP16: Uint16Array, BF16: Uint16Array, FP32: Float32Array,
  FP64: Float64Array,
} as Record<Exclude<DataType, 'BYTES'>, ArrayCtor>;

const utf8 = new TextEncoder();

/**
 * Input elements -> the raw little-endian bytes both protocols carry. A typed array of
 * the datatype's own type is used without copying.
 */
export function toRawBytes(input: string, datatype: DataType, data: InputData): Uint8Array {
  if (datatype === 'BYTES') return serializeBytes(toByteElements(input, data));
  const Ctor = ARRAY_OF[datatype];
  if (data instanceof Ctor) return bytesOf(data);
  if ((datatype === 'FP16' || datatype === 'BF16') && !(data instanceof Uint16Array)) {
    throw new BatchwiseClientError(`input '${input}': ${datatype} data must be a Uint16Array of bit patterns`);
  }
  const values = Array.from(data as ArrayLike<unknown>);
  if (Ctor === BigInt64Array || Ctor === BigUint64Array) {
    return bytesOf((Ctor as unknown as typeof BigInt64Array).from(values, (v) => BigInt(v as number | bigint)));
  }
  if (values.some((v) => typeof v !== 'number' && typeof v !== 'boolean')) {
    throw new BatchwiseClientError(`input '${input}': ${datatype} data must be numbers${datatype === 'BOOL' ? ' or booleans' : ''}`);
  }
  const out = new Ctor(values.length) as Exclude<TypedArray, BigInt64Array | BigUint64Array>;
  for (let i = 0; i < values.length; i++) out[i] = Number(values[i]);
  return bytesOf(out);
}

function toByteElements(input: string, data: InputData): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (const v of Array.from(data as ArrayLike<unknown>)) {
    if (typeof v === 'string') out.push(utf8.encode(v));
    else if (v instanceof Uint8Array) out.push(v);
    else throw new BatchwiseClientError(`input '${input}': BYTES data must be strings or Uint8Arrays`);
  }
  return out;
}

/** Raw bytes -> output elements. Copies once, so the result is aligned and owns its memory. */
export function fromRawBytes(output: string, datatype: DataType, bytes: Uint8Array): OutputData {
  if (datatype === 'BYTES') return deserializeBytes(output, bytes);
  const Ctor = ARRAY_OF[datatype];
  if (bytes.byteLength % Ctor.BYTES_PER_ELEMENT !== 0) {
    throw new BatchwiseClientError(`output '${output}' has ${bytes.byteLength} bytes, not a whole number of ${datatype} elements`);
  }
  // Not bytes.slice(): on a Buffer that is a view, not a copy.
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new Ctor(copy.buffer);
}

// The KServe BYTES serialization is duplicated here (the server has its own) because this
// package is published for users and must not depend on the server.

/** Each element as a 4-byte little-endian length followed by its bytes. */
export function serializeBytes(elements: readonly Uint8Array[]): Uint8Array {
  let size = 0;
  for (const e of elements) size += 4 + e.byteLength;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  let offset = 0;
  for (const e of elements) {
    view.setUint32(offset, e.byteLength, true);
    out.set(e, offset + 4);
    offset += 4 + e.byteLength;
  }
  return out;
}

export function deserializeBytes(output: string, bytes: Uint8Array): Uint8Array[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: Uint8Array[] = [];
  let offset = 0;
  while (offset < bytes.byteLength) {
    if (offset + 4 > bytes.byteLength) throw new BatchwiseClientError(`output '${output}': truncated BYTES element length`);
    const length = view.getUint32(offset, true);
    const start = offset + 4;
    if (start + length > bytes.byteLength) throw new BatchwiseClientError(`output '${output}': truncated BYTES element`);
    // A plain Uint8Array view (not a Buffer), whichever protocol the bytes came over.
    out.push(new Uint8Array(bytes.buffer, bytes.byteOffset + start, length));
    offset = start + length;
  }
  return out;
}

// Typed arrays are in host byte order; Node runs on little-endian hosts only (x64, arm64).
function bytesOf(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}
