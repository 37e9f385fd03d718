import { deserializeBytesElements, isProtocolError, serializeBytesElements, TYPED_ARRAY_OF } from '@batchwise/protocol';
import { BatchwiseClientError } from './errors.ts';
import type { DataType, InputData, OutputData, TypedArray } from './types.ts';

/** The typed array of each datatype (FP16, BF16: Uint16Array of bit patterns), as the server holds them. */
export const ARRAY_OF = TYPED_ARRAY_OF;

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

/** Each element as a 4-byte little-endian length followed by its bytes (@batchwise/protocol's layout). */
export function serializeBytes(elements: readonly Uint8Array[]): Uint8Array {
  return serializeBytesElements(elements);
}

/** The elements of a BYTES output, as plain Uint8Array views (not Buffers) whichever protocol the bytes came over. */
export function deserializeBytes(output: string, bytes: Uint8Array): Uint8Array[] {
  try {
    return deserializeBytesElements(bytes, output).map((e) => new Uint8Array(e.buffer, e.byteOffset, e.byteLength));
  } catch (error) {
    throw isProtocolError(error) ? new BatchwiseClientError(`truncated BYTES output: ${error.message}`) : error;
  }
}

// Typed arrays are in host byte order; Node runs on little-endian hosts only (x64, arm64).
function bytesOf(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}
