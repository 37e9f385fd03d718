import { Errors } from '../errors/errors.ts';
import { expectedByteSize, type FixedSizeDataType } from './byte-size.ts';
import { TYPED_ARRAY_OF, type NumericArray } from './datatype.ts';
import { formatShape } from './shape.ts';
import type { Tensor } from './tensor.ts';

/**
 * The tensor's elements as the typed array of its datatype (FP16/BF16: raw Uint16Array
 * patterns). A view on `tensor.data` when it is aligned to the element size; otherwise one
 * copy, since typed arrays cannot start at an unaligned offset. Assumes a little-endian host,
 * as Node on x64 and arm64 is.
 */
export function typedArrayOf(tensor: Tensor): NumericArray {
  const { datatype, data, name } = tensor;
  if (datatype === 'BYTES') throw Errors.internal(`BYTES tensor '${name}' has no typed array view`);
  const ArrayType = TYPED_ARRAY_OF[datatype];
  const size = ArrayType.BYTES_PER_ELEMENT;
  if (data.byteLength % size !== 0) {
    throw Errors.invalidArg(`tensor '${name}' of datatype ${datatype} has ${data.byteLength} bytes, not a multiple of ${size}`);
  }
  const aligned = data.byteOffset % size === 0 ? data : data.slice();
  return new ArrayType(aligned.buffer, aligned.byteOffset, aligned.byteLength / size);
}

/** A tensor whose data is a view on the typed array's bytes (no copy). */
export function tensorFromTypedArray(name: string, datatype: FixedSizeDataType, shape: readonly number[], array: NumericArray): Tensor {
  const ArrayType = TYPED_ARRAY_OF[datatype];
  if (!(array instanceof ArrayType)) {
    throw Errors.invalidArg(`tensor '${name}' of datatype ${datatype} needs a ${ArrayType.name}, got a ${array.constructor.name}`);
  }
  const expected = expectedByteSize(datatype, shape, name);
  if (array.byteLength !== expected) {
    throw Errors.invalidArg(
      `tensor '${name}' of shape ${formatShape(shape)} needs ${expected / ArrayType.BYTES_PER_ELEMENT} elements, got ${array.length}`,
    );
  }
  return { name, datatype, shape, data: new Uint8Array(array.buffer, array.byteOffset, array.byteLength) };
}
