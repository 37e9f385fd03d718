import { Errors } from '../core/errors.ts';
import { serializeBytesElements, bytesElementsToStrings } from './bytes-codec.ts';
import { ELEMENT_BYTE_SIZE, TYPED_ARRAY_OF, type DataType } from './datatype.ts';
import { elementCount } from './shape.ts';
import type { Tensor } from './tensor.ts';

const INTEGER_RANGE: Partial<Record<DataType, [number, number]>> = {
  UINT8: [0, 255], INT8: [-128, 127], UINT16: [0, 65535], INT16: [-32768, 32767],
  UINT32: [0, 4294967295], INT32: [-2147483648, 2147483647],
  UINT64: [0, Number.MAX_SAFE_INTEGER], INT64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
};

/** Flattens nested JSON arrays iteratively, so absurd nesting cannot exhaust the stack. */
function flatten(name: string, data: unknown): unknown[] {
  if (!Array.isArray(data)) return [data];
  const out: unknown[] = [];
  const stack: { array: unknown[]; index: number }[] = [{ array: data, index: 0 }];
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    if (top.index >= top.array.length) {
      stack.pop();
      continue;
    }
    const value = top.array[top.index++];
    if (Array.isArray(value)) {
      if (stack.length >= 64) throw Errors.invalidArg(`data of input '${name}' is nested more than 64 levels deep`);
      stack.push({ array: value, index: 0 });
    } else {
      out.push(value);
    }
  }
  return out;
}

/** Decodes a JSON `data` field into raw little-endian bytes of the datatype. */
export function decodeJsonTensorData(name: string, datatype: DataType, shape: readonly number[], data: unknown): Uint8Array {
  if (datatype === 'FP16' || datatype === 'BF16') {
    throw Errors.invalidArg(`datatype ${datatype} of input '${name}' must be sent as binary data, not JSON`);
  }
  const values = flatten(name, data);
  const expected = elementCount(shape);
  if (values.length !== expected) {
    throw Errors.invalidArg(`unexpected number of elements for input '${name}': expected ${expected}, got ${values.length}`);
  }
  if (datatype === 'BYTES') {
    const strings = values.map((v, i) => {
      if (typeof v !== 'string') throw Errors.invalidArg(`element ${i} of BYTES input '${name}' must be a string, got ${typeof v}`);
      return v;
    });
    return serializeBytesElements(strings);
  }
  const bytes = new Uint8Array(expected * ELEMENT_BYTE_SIZE[datatype]);
  if (datatype === 'BOOL') {
    values.forEach((v, i) => {
      if (typeof v !== 'boolean') throw Errors.invalidArg(`element ${i} of BOOL input '${name}' must be true or false, got ${JSON.stringify(v)}`);
      bytes[i] = v ? 1 : 0;
    });
    return bytes;
  }
  const ArrayType = TYPED_ARRAY_OF[datatype];
  const target = new ArrayType(bytes.buffer, 0, expected);
  const range = INTEGER_RANGE[datatype];
  const big = datatype === 'INT64' || datatype === 'UINT64';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v !== 'number') throw Errors.invalidArg(`element ${i} of ${datatype} input '${name}' must be a number, got ${JSON.stringify(v) ?? typeof v}`);
    if (range && (!Number.isInteger(v) || v < range[0] || v > range[1])) {
      throw Errors.invalidArg(`element ${i} of input '${name}' (${v}) is not a valid ${datatype}`);
    }
    (target as unknown as (number | bigint)[])[i] = big ? BigInt(v) : v;
  }
  return bytes;
}

/** Encodes a tensor's elements as a flat JSON array. FP16/BF16 must travel binary. */
export function encodeJsonTensorData(tensor: Tensor): unknown[] {
  const { datatype, name } = tensor;
  if (datatype === 'FP16' || datatype === 'BF16') {
    throw Errors.invalidArg(`output '${name}' of datatype ${datatype} can only be returned as binary data`);
  }
  if (datatype === 'BYTES') return bytesElementsToStrings(tensor.data, name);
  if (datatype === 'BOOL') return Array.from(tensor.data, (b) => b !== 0);
  const ArrayType = TYPED_ARRAY_OF[datatype];
  const aligned = tensor.data.byteOffset % ArrayType.BYTES_PER_ELEMENT === 0 ? tensor.data : tensor.data.slice();
  const view = new ArrayType(aligned.buffer, aligned.byteOffset, aligned.byteLength / ArrayType.BYTES_PER_ELEMENT);
  if (datatype === 'INT64' || datatype === 'UINT64') return Array.from(view as BigInt64Array, (v) => Number(v));
  return Array.from(view as Float32Array);
}
