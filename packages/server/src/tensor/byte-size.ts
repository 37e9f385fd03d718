import { Errors, INT64_MAX } from '../errors/errors.ts';
import { ELEMENT_BYTE_SIZE, type DataType } from './datatype.ts';
import { describeValue } from './describe-value.ts';
import { formatShape } from './shape.ts';

export type FixedSizeDataType = Exclude<DataType, 'BYTES'>;

/** The largest tensor the server accepts, in bytes (and so in elements). */
export const MAX_TENSOR_BYTE_SIZE = 2 ** 31;
export const MAX_DIMENSIONS = 64;

/** A dimension as a frontend reads it: exact, so a bigint where it is beyond 2^53 (JSON integers, gRPC int64). */
export type Dimension = number | bigint;

const tooManyElements = (shape: readonly Dimension[], tensorName: string) =>
  Errors.invalidArg(
    `shape ${formatShape(shape)} of tensor '${tensorName}' has more elements than the ${MAX_TENSOR_BYTE_SIZE} one tensor may have`,
  );

const tooManyBytes = (datatype: FixedSizeDataType, shape: readonly number[], bytes: number, tensorName: string) =>
  Errors.invalidArg(
    `tensor '${tensorName}' of datatype ${datatype} and shape ${formatShape(shape)} would take ${bytes} bytes, more than the ${MAX_TENSOR_BYTE_SIZE} one tensor may take`,
  );

/**
 * Checks a request tensor's shape and returns it typed as numbers: an array of at most
 * MAX_DIMENSIONS non-negative integers whose element count and byte size fit. Counted exactly, as
 * Triton's HTTP frontend counts them: past INT64_MAX elements, or (a fixed-size datatype) bytes, is
 * Triton's refusal in its words; within them but past MAX_TENSOR_BYTE_SIZE is ours, naming the limit.
 */
export function validateShape(shape: unknown, tensorName: string, datatype: DataType): number[] {
  if (!Array.isArray(shape)) throw Errors.invalidArg(`shape of tensor '${tensorName}' must be an array of integers`);
  if (shape.length > MAX_DIMENSIONS) {
    throw Errors.invalidArg(`shape of tensor '${tensorName}' has ${shape.length} dimensions; at most ${MAX_DIMENSIONS} are supported`);
  }
  let product = 1;
  for (let i = 0; i < shape.length; i++) {
    const d: unknown = shape[i];
    const integer = typeof d === 'bigint' || (typeof d === 'number' && Number.isInteger(d));
    if (!integer || (d as Dimension) < 0) {
      const got = typeof d === 'bigint' ? String(d) : describeValue(d);
      throw Errors.invalidArg(`shape of tensor '${tensorName}': dimension ${i} must be a non-negative integer, got ${got}`);
    }
    product *= Number(d);
  }
  const dims = shape as Dimension[];
  // The product of numbers is exact up to the limit; beyond it, exactly counted, it says whose refusal it is.
  if (product > MAX_TENSOR_BYTE_SIZE) throw tooLarge(dims, tensorName, datatype);
  // A zero dimension leaves the others unbounded: each must still be one a tensor of elements could have.
  const huge = dims.findIndex((d) => d > MAX_TENSOR_BYTE_SIZE);
  if (huge >= 0) {
    throw Errors.invalidArg(
      `shape of tensor '${tensorName}': dimension ${huge} (${dims[huge]}) is larger than the ${MAX_TENSOR_BYTE_SIZE} elements one tensor may have`,
    );
  }
  const numbers = dims.map(Number);
  if (datatype !== 'BYTES') expectedByteSize(datatype, numbers, tensorName);
  return numbers;
}

/** Why a shape of more than MAX_TENSOR_BYTE_SIZE elements is refused: past INT64_MAX in Triton's words, else ours. */
function tooLarge(shape: readonly Dimension[], tensorName: string, datatype: DataType): Error {
  let count = 1n;
  for (const d of shape) count *= BigInt(d);
  if (count > INT64_MAX) return Errors.elementCountOverflow(tensorName, formatShape(shape));
  if (datatype !== 'BYTES' && count * BigInt(ELEMENT_BYTE_SIZE[datatype]) > INT64_MAX) {
    return Errors.byteSizeOverflow(tensorName, count, ELEMENT_BYTE_SIZE[datatype]);
  }
  return tooManyElements(shape, tensorName);
}

/** Element count of a validated shape; more than MAX_TENSOR_BYTE_SIZE is an INVALID_ARG naming the tensor. */
export function checkedElementCount(shape: readonly number[], tensorName: string): number {
  if (shape.includes(0)) return 0;
  let n = 1;
  for (const d of shape) {
    n *= d;
    // Checked at each step: the product stays exact (both factors <= 2^31) and never reaches Infinity.
    if (n > MAX_TENSOR_BYTE_SIZE) throw tooManyElements(shape, tensorName);
  }
  return n;
}

/** Byte size of a fixed-size tensor; over MAX_TENSOR_BYTE_SIZE is an INVALID_ARG naming the tensor and the limit. */
export function expectedByteSize(datatype: FixedSizeDataType, shape: readonly number[], tensorName: string): number {
  const bytes = checkedElementCount(shape, tensorName) * ELEMENT_BYTE_SIZE[datatype];
  if (bytes > MAX_TENSOR_BYTE_SIZE) throw tooManyBytes(datatype, shape, bytes, tensorName);
  return bytes;
}
