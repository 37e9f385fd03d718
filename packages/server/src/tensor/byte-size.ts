import { Errors } from '../errors/errors.ts';
import { ELEMENT_BYTE_SIZE, type DataType } from './datatype.ts';
import { describeValue } from './describe-value.ts';
import { formatShape } from './shape.ts';

export type FixedSizeDataType = Exclude<DataType, 'BYTES'>;

/** The largest tensor the server accepts, in bytes (and so in elements). */
export const MAX_TENSOR_BYTE_SIZE = 2 ** 31;
/** Triton's words for a shape past the element limit, which its clients and tests match on. */
const PAST_ELEMENT_LIMIT = `causes total element count to exceed maximum size of ${MAX_TENSOR_BYTE_SIZE}`;
export const MAX_DIMENSIONS = 64;

/**
 * Checks that every dimension is an integer in [0, MAX_TENSOR_BYTE_SIZE] and that there are
 * at most MAX_DIMENSIONS of them; returns the shape typed as numbers.
 */
export function validateShape(shape: unknown, tensorName: string): number[] {
  if (!Array.isArray(shape)) throw Errors.invalidArg(`shape of tensor '${tensorName}' must be an array of integers`);
  if (shape.length > MAX_DIMENSIONS) {
    throw Errors.invalidArg(`shape of tensor '${tensorName}' has ${shape.length} dimensions; at most ${MAX_DIMENSIONS} are supported`);
  }
  for (let i = 0; i < shape.length; i++) {
    const d: unknown = shape[i];
    // Integers beyond 2^53 arrive as bigints (json-text.ts): non-negative ones are only too large.
    const integer = typeof d === 'bigint' || (typeof d === 'number' && Number.isInteger(d));
    if (!integer || (d as number | bigint) < 0) {
      const got = typeof d === 'bigint' ? String(d) : describeValue(d);
      throw Errors.invalidArg(`shape of tensor '${tensorName}': dimension ${i} must be a non-negative integer, got ${got}`);
    }
    if ((d as number | bigint) > MAX_TENSOR_BYTE_SIZE) {
      throw Errors.invalidArg(`shape of tensor '${tensorName}': dimension ${i} (${String(d)}) ${PAST_ELEMENT_LIMIT}`);
    }
  }
  return shape as number[];
}

/** Element count of a validated shape; too many elements is an INVALID_ARG naming the tensor. */
export function checkedElementCount(shape: readonly number[], tensorName: string): number {
  if (shape.includes(0)) return 0;
  let n = 1;
  for (const d of shape) {
    n *= d;
    // Checked at each step: the product stays exact (both factors <= 2^31) and never reaches Infinity.
    if (n > MAX_TENSOR_BYTE_SIZE) {
      throw Errors.invalidArg(`shape ${formatShape(shape)} of tensor '${tensorName}' ${PAST_ELEMENT_LIMIT}`);
    }
  }
  return n;
}

/** Byte size of a fixed-size tensor; over MAX_TENSOR_BYTE_SIZE is an INVALID_ARG naming the tensor, in Triton's words. */
export function expectedByteSize(datatype: FixedSizeDataType, shape: readonly number[], tensorName: string): number {
  const bytes = checkedElementCount(shape, tensorName) * ELEMENT_BYTE_SIZE[datatype];
  if (bytes > MAX_TENSOR_BYTE_SIZE) {
    throw Errors.invalidArg(
      `byte size overflow for input '${tensorName}': datatype ${datatype} and shape ${formatShape(shape)} would take ${bytes} bytes; the limit is ${MAX_TENSOR_BYTE_SIZE}`,
    );
  }
  return bytes;
}
