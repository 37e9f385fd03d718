import type { DataType } from './datatype.ts';

/**
 * A tensor as it moves through the server: shape, datatype and its elements as raw
 * little-endian row-major bytes. For BYTES the bytes are the KServe serialization: each
 * element a 4-byte little-endian length followed by that many bytes.
 *
 * `data` is usually a view on a received buffer or on a batch output: never assume it
 * starts at offset 0 of its ArrayBuffer, or that it is aligned to its element size.
 */
export interface Tensor {
  readonly name: string;
  readonly datatype: DataType;
  readonly shape: readonly number[];
  readonly data: Uint8Array;
}

export type { ParameterValue, Parameters } from '@batchwise/protocol';
