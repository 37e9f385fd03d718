import { TYPED_ARRAY_OF, type TypedArrayConstructor } from '@batchwise/protocol';
import type { DataType, Tensor, TensorData } from './types.ts';

/** The typed array that holds each datatype's elements (BYTES: none, one Buffer per element). */
export const ARRAY_OF: Readonly<Record<Exclude<DataType, 'BYTES'>, TypedArrayConstructor>> = TYPED_ARRAY_OF;

type Element = number | bigint | boolean | string | Uint8Array;

/** Elements a shape holds. */
export function elementCount(shape: readonly number[]): number {
  let count = 1;
  for (const dim of shape) count *= dim;
  return count;
}

/**
 * Builds a tensor. Typed arrays must be the datatype's own (Float32Array for FP32...); plain
 * arrays of numbers, bigints, booleans, strings (BYTES, as UTF-8) or Uint8Arrays (BYTES) are
 * converted (FP16 from numbers to half-precision bits). Throws if the element count does not
 * match the shape.
 */
export function tensor(name: string, datatype: DataType, shape: readonly number[], data: TensorData | readonly Element[]): Tensor {
  for (const dim of shape) {
    if (!Number.isSafeInteger(dim) || dim < 0)
      throw new TypeError(`tensor '${name}': shape [${shape.join(',')}] has a dimension that is not a non-negative integer`);
  }
  const converted = toTensorData(name, datatype, data);
  const count = elementCount(shape);
  if (converted.length !== count) {
    throw new RangeError(`tensor '${name}': shape [${shape.join(',')}] holds ${count} elements, but ${converted.length} were given`);
  }
  return { name, datatype, shape: [...shape], data: converted };
}

function toTensorData(name: string, datatype: DataType, data: TensorData | readonly Element[]): TensorData {
  if (datatype === 'BYTES') {
    if (ArrayBuffer.isView(data))
      throw new TypeError(`tensor '${name}': BYTES data is one Buffer (or string) per element, not a typed array`);
    return (data as readonly Element[]).map((e, i) => {
      if (typeof e === 'string') return Buffer.from(e, 'utf8');
      if (e instanceof Uint8Array) return Buffer.isBuffer(e) ? e : Buffer.from(e.buffer, e.byteOffset, e.byteLength);
      throw new TypeError(`tensor '${name}': BYTES element ${i} is ${typeof e}, not a string or Uint8Array`);
    });
  }
  const ArrayClass = ARRAY_OF[datatype];
  if (ArrayClass === undefined) throw new TypeError(`tensor '${name}': unknown datatype '${String(datatype)}'`);
  if (ArrayBuffer.isView(data)) {
    if (!(data instanceof ArrayClass)) {
      throw new TypeError(`tensor '${name}': ${datatype} data must be a ${ArrayClass.name}, got ${data.constructor.name}`);
    }
    return data;
  }
  const elements = data as readonly Element[];
  if (ArrayClass === BigInt64Array || ArrayClass === BigUint64Array) {
    return (ArrayClass as BigInt64ArrayConstructor).from(elements, (e) => BigInt(e as number | bigint));
  }
  if (datatype === 'FP16') return Uint16Array.from(elements, (e) => halfBits(Number(e)));
  if (datatype === 'BOOL') return Uint8Array.from(elements, (e) => (e ? 1 : 0));
  return (ArrayClass as Float64ArrayConstructor).from(elements, (e) => Number(e));
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE 754 half-precision bits of a number, rounded to nearest even. */
export function halfBits(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exponent = (x >>> 23) & 0xff;
  let mantissa = x & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa ? 0x200 : 0);
  const e = exponent - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - e;
    const half = mantissa >>> shift;
    const rest = mantissa & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    return sign | (rest > mid || (rest === mid && half & 1) ? half + 1 : half);
  }
  const rest = mantissa & 0x1fff;
  let bits = sign | (e << 10) | (mantissa >>> 13);
  if (rest > 0x1000 || (rest === 0x1000 && bits & 1)) bits++;
  return bits;
}
