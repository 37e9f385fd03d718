import { Errors } from '../errors/errors.ts';
import { checkedElementCount, validateShape } from './byte-size.ts';
import { bytesElementsToStrings, serializeBytesElements } from './bytes-codec.ts';
import { ELEMENT_BYTE_SIZE, TYPED_ARRAY_OF, type DataType } from './datatype.ts';
import { describeKind } from './describe-value.ts';
import { jsonNestingError, MAX_JSON_NESTING_DEPTH } from './json-text.ts';
import type { Tensor } from './tensor.ts';
import { typedArrayOf } from './typed-view.ts';

const INTEGER_RANGE: Partial<Record<DataType, readonly [number, number]>> = {
  UINT8: [0, 255],
  INT8: [-128, 127],
  UINT16: [0, 65535],
  INT16: [-32768, 32767],
  UINT32: [0, 4294967295],
  INT32: [-2147483648, 2147483647],
};
/** Beyond 2^53 these arrive as bigints (json-text.ts), exact; a double there has lost digits. */
const INTEGER64_RANGE: Partial<Record<DataType, readonly [bigint, bigint]>> = {
  INT64: [-(2n ** 63n), 2n ** 63n - 1n],
  UINT64: [0n, 2n ** 64n - 1n],
};

/**
 * Flattens nested arrays iteratively (no recursion, so no stack to exhaust). `data` sits
 * `enclosingDepth` levels deep in its request; arrays that take the request past Triton's JSON
 * nesting limit are refused in its words.
 */
function flatten(name: string, data: unknown, enclosingDepth: number): unknown[] {
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
      if (enclosingDepth + stack.length >= MAX_JSON_NESTING_DEPTH) {
        throw jsonNestingError(`the data of input '${name}' is nested more than ${MAX_JSON_NESTING_DEPTH - enclosingDepth} levels deep`);
      }
      stack.push({ array: value, index: 0 });
    } else {
      out.push(value);
    }
  }
  return out;
}

function notANumber(name: string, datatype: DataType, index: number, value: unknown) {
  return Errors.invalidArg(`element ${index} of ${datatype} input '${name}' must be a number, got ${describeKind(value)}`);
}

/**
 * Decodes the JSON `data` of an input (nested or flat) into raw little-endian bytes. `data` sits
 * `enclosingDepth` levels of objects and arrays deep in its request (for the nesting limit).
 */
export function decodeJsonTensorData(
  name: string,
  datatype: DataType,
  shape: readonly number[],
  data: unknown,
  enclosingDepth = 0,
): Uint8Array {
  if (datatype === 'FP16' || datatype === 'BF16') {
    throw Errors.invalidArg(`datatype ${datatype} of input '${name}' must be sent as binary data, not JSON`);
  }
  const expected = checkedElementCount(validateShape(shape, name, datatype), name);
  const values = flatten(name, data, enclosingDepth);
  if (values.length !== expected) {
    throw Errors.invalidArg(`unexpected number of elements for input '${name}': expected ${expected}, got ${values.length}`);
  }
  if (datatype === 'BYTES') {
    for (let i = 0; i < values.length; i++) {
      if (typeof values[i] !== 'string') {
        throw Errors.invalidArg(`element ${i} of BYTES input '${name}' must be a string, got ${describeKind(values[i])}`);
      }
    }
    return serializeBytesElements(values as string[]);
  }
  const bytes = new Uint8Array(expected * ELEMENT_BYTE_SIZE[datatype]);
  if (datatype === 'BOOL') {
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (typeof v !== 'boolean') {
        throw Errors.invalidArg(`element ${i} of BOOL input '${name}' must be true or false, got ${describeKind(v)}`);
      }
      bytes[i] = v ? 1 : 0;
    }
    return bytes;
  }
  const target = new TYPED_ARRAY_OF[datatype](bytes.buffer, 0, expected);
  const range64 = INTEGER64_RANGE[datatype];
  if (range64) {
    const bigTarget = target as BigInt64Array | BigUint64Array;
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      const exact = typeof v === 'bigint' ? v : typeof v === 'number' && Number.isSafeInteger(v) ? BigInt(v) : undefined;
      if (exact === undefined || exact < range64[0] || exact > range64[1]) {
        if (typeof v !== 'number' && typeof v !== 'bigint') throw notANumber(name, datatype, i, v);
        throw Errors.invalidArg(
          `element ${i} of input '${name}' is not a valid ${datatype}: expected an integer in [${range64[0]}, ${range64[1]}]`,
        );
      }
      bigTarget[i] = exact;
    }
    return bytes;
  }
  const range = INTEGER_RANGE[datatype];
  const numberTarget = target as Exclude<typeof target, BigInt64Array | BigUint64Array>;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (range) {
      if (typeof v !== 'number' && typeof v !== 'bigint') throw notANumber(name, datatype, i, v);
      if (typeof v === 'bigint' || !Number.isInteger(v) || v < range[0] || v > range[1]) {
        throw Errors.invalidArg(
          `element ${i} of input '${name}' is not a valid ${datatype}: expected an integer in [${range[0]}, ${range[1]}]`,
        );
      }
      numberTarget[i] = v;
    } else {
      // FP32/FP64 take NaN and ±Infinity as Triton does; FP32 rounds (1e39 becomes Infinity).
      if (typeof v === 'bigint') numberTarget[i] = Number(v);
      else if (typeof v === 'number') numberTarget[i] = v;
      else throw notANumber(name, datatype, i, v);
    }
  }
  return bytes;
}

/**
 * The text of a tensor's elements as a flat JSON array, written as Triton writes them
 * (TritonJson's rapidjson writer with kWriteNanAndInfFlag): NaN, Infinity and -Infinity as
 * those bare tokens, which Python's json and tritonclient read back (JSON.parse does not), -0
 * as -0.0, and 64-bit integers exactly, digit for digit. FP16/BF16 cannot be JSON: send them binary.
 */
export function encodeJsonTensorData(tensor: Tensor): string {
  const { datatype, name } = tensor;
  if (datatype === 'FP16' || datatype === 'BF16') {
    throw Errors.invalidArg(`output '${name}' of datatype ${datatype} can only be returned as binary data`);
  }
  if (datatype === 'BYTES') return JSON.stringify(bytesElementsToStrings(tensor.data, name));
  if (datatype === 'BOOL') return JSON.stringify(Array.from(tensor.data, (b) => b !== 0));
  const view = typedArrayOf(tensor);
  const parts = new Array<string>(view.length);
  if (view instanceof BigInt64Array || view instanceof BigUint64Array) {
    for (let i = 0; i < view.length; i++) parts[i] = view[i]!.toString();
  } else if (datatype === 'FP32' || datatype === 'FP64') {
    for (let i = 0; i < view.length; i++) parts[i] = floatText(view[i] as number);
  } else {
    for (let i = 0; i < view.length; i++) parts[i] = String(view[i]);
  }
  return `[${parts.join(',')}]`;
}

function floatText(value: number): string {
  if (Object.is(value, -0)) return '-0.0'; // as rapidjson writes it; JSON.stringify drops the sign
  if (Number.isFinite(value)) return JSON.stringify(value);
  if (Number.isNaN(value)) return 'NaN';
  return value > 0 ? 'Infinity' : '-Infinity';
}
