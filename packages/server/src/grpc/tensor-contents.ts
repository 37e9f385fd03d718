import { Errors } from '../core/index.ts';
import type { DataType } from '../tensor/datatype.ts';
import { serializeBytesElements } from '../tensor/bytes-codec.ts';
import type { InferTensorContentsWire, WireLong } from './wire-types.ts';

type ContentsField = keyof InferTensorContentsWire;

/** The InferTensorContents field that carries each datatype; FP16 and BF16 have none. */
export const CONTENTS_FIELD_OF: Readonly<Record<DataType, ContentsField | undefined>> = {
  BOOL: 'bool_contents',
  UINT8: 'uint_contents', UINT16: 'uint_contents', UINT32: 'uint_contents',
  INT8: 'int_contents', INT16: 'int_contents', INT32: 'int_contents',
  INT64: 'int64_contents', UINT64: 'uint64_contents',
  FP32: 'fp32_contents', FP64: 'fp64_contents',
  BYTES: 'bytes_contents',
  FP16: undefined, BF16: undefined,
};

const FIELDS: readonly ContentsField[] = [
  'bool_contents', 'int_contents', 'int64_contents', 'uint_contents',
  'uint64_contents', 'fp32_contents', 'fp64_contents', 'bytes_contents',
];

/**
 * Typed `contents` of one input -> the raw little-endian bytes every other part of the
 * server works with (BYTES: 4-byte length-prefixed elements). Element counts against the
 * shape are checked later, in core, like those of raw inputs.
 */
export function contentsToRaw(input: string, datatype: DataType, contents: InferTensorContentsWire): Uint8Array {
  const field = CONTENTS_FIELD_OF[datatype];
  for (const other of FIELDS) {
    if (other !== field && (contents[other]?.length ?? 0) > 0) {
      throw Errors.invalidArg(
        field
          ? `input '${input}' of datatype ${datatype} has data in '${other}'; ${datatype} elements belong in '${field}'`
          : `input '${input}' of datatype ${datatype} must be sent in raw_input_contents; typed contents have no ${datatype} field`,
      );
    }
  }
  switch (datatype) {
    case 'BOOL':
      return Uint8Array.from(contents.bool_contents ?? [], (v) => (v ? 1 : 0));
    case 'UINT8':
      return bytesOf(Uint8Array.from(inRange(contents.uint_contents, 0, 0xff, input, datatype)));
    case 'UINT16':
      return bytesOf(Uint16Array.from(inRange(contents.uint_contents, 0, 0xffff, input, datatype)));
    case 'UINT32':
      return bytesOf(Uint32Array.from(contents.uint_contents ?? []));
    case 'INT8':
      return bytesOf(Int8Array.from(inRange(contents.int_contents, -0x80, 0x7f, input, datatype)));
    case 'INT16':
      return bytesOf(Int16Array.from(inRange(contents.int_contents, -0x8000, 0x7fff, input, datatype)));
    case 'INT32':
      return bytesOf(Int32Array.from(contents.int_contents ?? []));
    case 'INT64':
      return bytesOf(BigInt64Array.from(contents.int64_contents ?? [], toBigInt));
    case 'UINT64':
      return bytesOf(BigUint64Array.from(contents.uint64_contents ?? [], toBigInt));
    case 'FP32':
      return bytesOf(Float32Array.from(contents.fp32_contents ?? []));
    case 'FP64':
      return bytesOf(Float64Array.from(contents.fp64_contents ?? []));
    case 'BYTES':
      return serializeBytesElements(contents.bytes_contents ?? []);
    case 'FP16':
    case 'BF16':
      // Reached only with every typed field empty: zero elements.
      return new Uint8Array(0);
  }
}

/** True when any typed field holds elements. */
export function hasContents(contents: InferTensorContentsWire | null | undefined): boolean {
  if (!contents) return false;
  return FIELDS.some((f) => (contents[f]?.length ?? 0) > 0);
}

// Typed arrays are in host byte order; Node runs on little-endian hosts only (x64, arm64).
function bytesOf(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

function toBigInt(v: WireLong): bigint {
  return BigInt(v);
}

function inRange(values: number[] | undefined, min: number, max: number, input: string, datatype: DataType): number[] {
  const list = values ?? [];
  for (let i = 0; i < list.length; i++) {
    const v = list[i]!;
    if (v < min || v > max) {
      // The element, not its value: error messages reach the logs, tensor data must not.
      throw Errors.invalidArg(`element ${i} of input '${input}' is outside the range of ${datatype} [${min}, ${max}]`);
    }
  }
  return list;
}
