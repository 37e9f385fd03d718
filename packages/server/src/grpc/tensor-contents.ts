import { Errors } from '../core/index.ts';
import { ELEMENT_BYTE_SIZE, type DataType } from '../tensor/datatype.ts';
import {
  CONTENTS_FIELD_NUMBER,
  ELEMENT_WIRE_TYPE,
  FIXED32,
  FIXED64,
  WireCursor,
  type ContentsField,
  type WireContents,
} from './wire-contents.ts';

/** The InferTensorContents field that carries each datatype; FP16 and BF16 have none. */
export const CONTENTS_FIELD_OF: Readonly<Record<DataType, ContentsField | undefined>> = {
  BOOL: 'bool_contents',
  UINT8: 'uint_contents',
  UINT16: 'uint_contents',
  UINT32: 'uint_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  UINT64: 'uint64_contents',
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
  BYTES: 'bytes_contents',
  FP16: undefined,
  BF16: undefined,
};

const FIELDS = Object.keys(CONTENTS_FIELD_NUMBER) as ContentsField[];

/** Elements in the contents, all fields together. */
export function contentsElementCount(contents: WireContents): number {
  let n = 0;
  for (const c of contents.counts) n += c;
  return n;
}

/** True when any typed field holds elements. */
export function hasContents(contents: WireContents | null | undefined): boolean {
  return contents !== undefined && contents !== null && contentsElementCount(contents) > 0;
}

/** Bytes contentsToRaw allocates for the contents as `datatype`. */
export function decodedContentsBytes(datatype: DataType, contents: WireContents): number {
  const field = CONTENTS_FIELD_OF[datatype];
  if (field === undefined) return 0;
  const n = contents.counts[CONTENTS_FIELD_NUMBER[field]]!;
  return datatype === 'BYTES' ? 4 * n + contents.bytesContentBytes : n * ELEMENT_BYTE_SIZE[datatype];
}

/**
 * Typed `contents` of one input -> the raw little-endian bytes every other part of the server
 * works with (BYTES: 4-byte length-prefixed elements), written from the wire straight into one
 * array sized from the counts: no value, string or Buffer per element. Values are read as
 * protobufjs reads them (int32 and uint32 from a varint's low 32 bits, bool as those bits not 0).
 * Element counts against the shape are checked later, in core, like those of raw inputs.
 */
export function contentsToRaw(input: string, datatype: DataType, contents: WireContents): Uint8Array {
  const field = CONTENTS_FIELD_OF[datatype];
  for (const other of FIELDS) {
    if (other !== field && contents.counts[CONTENTS_FIELD_NUMBER[other]]! > 0) {
      throw Errors.invalidArg(
        field
          ? `input '${input}' of datatype ${datatype} has data in '${other}'; ${datatype} elements belong in '${field}'`
          : `input '${input}' of datatype ${datatype} must be sent in raw_input_contents; typed contents have no ${datatype} field`,
      );
    }
  }
  // FP16 and BF16 reach here only with every typed field empty: zero elements.
  if (field === undefined || datatype === 'FP16' || datatype === 'BF16') return new Uint8Array(0);
  const out = new Uint8Array(decodedContentsBytes(datatype, contents));
  const source = Buffer.from(contents.message.buffer, contents.message.byteOffset, contents.message.byteLength);
  const number = CONTENTS_FIELD_NUMBER[field];
  const elementType = ELEMENT_WIRE_TYPE[number]!;
  const write = writerOf(datatype, input, out, source);
  const fixedSize = elementType === FIXED32 || elementType === FIXED64 ? ELEMENT_BYTE_SIZE[datatype] : 0;
  let index = 0;
  for (const [start, end] of contents.ranges) {
    const cursor = new WireCursor(source, start, end);
    while (!cursor.done) {
      const tag = cursor.varint();
      if (tag >>> 3 !== number) {
        cursor.skip(tag & 7);
      } else if ((tag & 7) === elementType) {
        write(cursor, index++);
      } else {
        // A packed run (countContents checked the wire types and lengths).
        const runEnd = cursor.delimited();
        const run = new WireCursor(source, cursor.pos, runEnd);
        cursor.pos = runEnd;
        if (fixedSize > 0) {
          // FP32/FP64 are little-endian IEEE on the wire as in the tensor: the run is copied whole.
          source.copy(out, index * fixedSize, run.pos, run.end);
          index += (run.end - run.pos) / fixedSize;
        } else {
          while (!run.done) write(run, index++);
        }
      }
    }
  }
  return out;
}

/** Reads one element at the cursor and writes it as element `index` of `out`. */
type ElementWriter = (cursor: WireCursor, index: number) => void;

// Typed arrays are in host byte order; Node runs on little-endian hosts only (x64, arm64).
function writerOf(datatype: Exclude<DataType, 'FP16' | 'BF16'>, input: string, out: Uint8Array, source: Buffer): ElementWriter {
  const { buffer, byteOffset, byteLength } = out;
  switch (datatype) {
    case 'BOOL':
      return (c, i) => void (out[i] = c.varint() !== 0 ? 1 : 0);
    case 'UINT8':
      return ranged(out, input, datatype, 0, 0xff, (c) => c.varint());
    case 'UINT16':
      return ranged(new Uint16Array(buffer, byteOffset, byteLength / 2), input, datatype, 0, 0xffff, (c) => c.varint());
    case 'UINT32':
      return ranged(new Uint32Array(buffer, byteOffset, byteLength / 4), input, datatype, 0, 0xffffffff, (c) => c.varint());
    case 'INT8':
      return ranged(new Int8Array(buffer, byteOffset, byteLength), input, datatype, -0x80, 0x7f, (c) => c.varint() | 0);
    case 'INT16':
      return ranged(new Int16Array(buffer, byteOffset, byteLength / 2), input, datatype, -0x8000, 0x7fff, (c) => c.varint() | 0);
    case 'INT32':
      return ranged(new Int32Array(buffer, byteOffset, byteLength / 4), input, datatype, -0x80000000, 0x7fffffff, (c) => c.varint() | 0);
    case 'INT64':
    case 'UINT64': {
      // Both halves as they are: the two's-complement bits of an int64 and a uint64 alike.
      const words = new Uint32Array(buffer, byteOffset, byteLength / 4);
      return (c, i) => {
        words[2 * i] = c.varint();
        words[2 * i + 1] = c.high;
      };
    }
    case 'FP32':
    case 'FP64': {
      const size = ELEMENT_BYTE_SIZE[datatype];
      return (c, i) => {
        const from = c.pos;
        c.advance(size);
        source.copy(out, i * size, from, from + size);
      };
    }
    case 'BYTES': {
      const lengths = new DataView(buffer, byteOffset, byteLength);
      let offset = 0;
      return (c) => {
        const end = c.delimited();
        const length = end - c.pos;
        lengths.setUint32(offset, length, true);
        // Most elements are short: a loop beats a call into Buffer.copy for them.
        if (length <= 16) for (let k = 0; k < length; k++) out[offset + 4 + k] = source[c.pos + k]!;
        else source.copy(out, offset + 4, c.pos, end);
        offset += 4 + length;
        c.pos = end;
      };
    }
  }
}

/** A writer of 32-bit-or-narrower integers that refuses values outside [min, max], naming the element. */
function ranged(
  view: { [index: number]: number },
  input: string,
  datatype: DataType,
  min: number,
  max: number,
  read: (cursor: WireCursor) => number,
): ElementWriter {
  return (c, i) => {
    const v = read(c);
    if (v < min || v > max) {
      // The element, not its value: error messages reach the logs, tensor data must not.
      throw Errors.invalidArg(`element ${i} of input '${input}' is outside the range of ${datatype} [${min}, ${max}]`);
    }
    view[i] = v;
  };
}
