import { Errors } from '../core/index.ts';

/**
 * The typed `contents` of ModelInferRequest inputs, read from the protobuf wire where they lie
 * instead of being decoded by protobufjs (a Buffer per bytes_contents element, a boxed number or
 * a decimal string per numeric element, before anything could count them). Walking the wire
 * counts each field's elements first, so the request can be checked and charged before its
 * elements are decoded, straight into typed arrays or the BYTES layout (tensor-contents.ts).
 */

/** InferTensorContents field numbers (grpc_service.proto). */
export const CONTENTS_FIELD_NUMBER = {
  bool_contents: 1,
  int_contents: 2,
  int64_contents: 3,
  uint_contents: 4,
  uint64_contents: 5,
  fp32_contents: 6,
  fp64_contents: 7,
  bytes_contents: 8,
} as const;
export type ContentsField = keyof typeof CONTENTS_FIELD_NUMBER;

export const VARINT = 0;
export const FIXED64 = 1;
export const LENGTH_DELIMITED = 2;
export const FIXED32 = 5;

/** The wire type of one element of each field, by field number (index 0 unused). */
export const ELEMENT_WIRE_TYPE = [-1, VARINT, VARINT, VARINT, VARINT, VARINT, FIXED32, FIXED64, LENGTH_DELIMITED] as const;

const BYTES_ELEMENT_TAG = (CONTENTS_FIELD_NUMBER.bytes_contents << 3) | LENGTH_DELIMITED;

/** One input's `contents`, as found in the message. */
export interface WireContents {
  readonly message: Uint8Array;
  /** Byte ranges of its InferTensorContents: protobuf merges a message field sent more than once. */
  readonly ranges: readonly (readonly [start: number, end: number])[];
  /** Elements of each field, by field number (index 0 unused). */
  readonly counts: readonly number[];
  /** Bytes of all bytes_contents elements together. */
  readonly bytesContentBytes: number;
}

/** A position in a message, read forward; every read is bounds-checked against `end`. */
export class WireCursor {
  /** High 32 bits of the last varint read by varint() (its low 32 bits are returned). */
  high = 0;

  constructor(
    readonly bytes: Uint8Array,
    public pos: number,
    readonly end: number,
  ) {}

  get done(): boolean {
    return this.pos >= this.end;
  }

  /** Reads a varint of up to 10 bytes: returns its low 32 bits (unsigned) and leaves the high ones in `high`. */
  varint(): number {
    const { bytes, end } = this;
    let low = 0;
    let high = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      if (this.pos >= end) throw malformed('a varint runs past the end');
      const b = bytes[this.pos++]!;
      const bits = b & 0x7f;
      if (shift < 28) low |= bits << shift;
      else if (shift === 28) {
        low |= bits << 28;
        high = bits >>> 4;
      } else high |= bits << (shift - 32);
      if (b < 0x80) {
        this.high = high >>> 0;
        return low >>> 0;
      }
    }
    throw malformed('a varint is longer than 10 bytes');
  }

  /** Reads a length prefix and returns where the delimited bytes end, checked against the end. */
  delimited(): number {
    const length = this.varint();
    if (this.high !== 0 || length > this.end - this.pos) throw malformed('a length-delimited field runs past the end');
    return this.pos + length;
  }

  skip(wireType: number): void {
    switch (wireType) {
      case VARINT:
        this.varint();
        return;
      case FIXED64:
        return this.advance(8);
      case LENGTH_DELIMITED:
        this.pos = this.delimited();
        return;
      case FIXED32:
        return this.advance(4);
      default:
        throw malformed(`wire type ${wireType} is not supported`);
    }
  }

  advance(bytes: number): void {
    if (bytes > this.end - this.pos) throw malformed('a fixed-size field runs past the end');
    this.pos += bytes;
  }
}

export function malformed(what: string): Error {
  return Errors.invalidArg(`malformed ModelInferRequest: ${what}`);
}

/** An input's `contents` found at `ranges` of `message` (infer-request-reader.ts), its elements counted field by field. */
export function countContents(message: Uint8Array, ranges: [number, number][]): WireContents {
  const counts = [0, 0, 0, 0, 0, 0, 0, 0, 0];
  let bytesElements = 0;
  let bytesContentBytes = 0;
  for (const [start, end] of ranges) {
    const cursor = new WireCursor(message, start, end);
    while (!cursor.done) {
      // Most often short bytes_contents elements (tag and length one byte each): counted in a
      // loop of their own, so that tens of millions of them are counted in well under a second.
      let pos = cursor.pos;
      let run = 0;
      while (pos + 1 < end && message[pos] === BYTES_ELEMENT_TAG && message[pos + 1]! < 0x80) {
        pos += 2 + message[pos + 1]!;
        run++;
      }
      if (pos > end) throw malformed('a length-delimited field runs past the end');
      if (run > 0) {
        bytesElements += run;
        bytesContentBytes += pos - cursor.pos - 2 * run;
        cursor.pos = pos;
        continue;
      }
      const tag = cursor.varint();
      const field = tag >>> 3;
      const wireType = tag & 7;
      if (field < 1 || field > 8) {
        cursor.skip(wireType);
        continue;
      }
      const elementType = ELEMENT_WIRE_TYPE[field]!;
      if (field === CONTENTS_FIELD_NUMBER.bytes_contents) {
        if (wireType !== LENGTH_DELIMITED) throw malformed(`bytes_contents has wire type ${wireType}`);
        const end = cursor.delimited();
        bytesContentBytes += end - cursor.pos;
        cursor.pos = end;
        counts[field]++;
      } else if (wireType === elementType) {
        cursor.skip(wireType);
        counts[field]++;
      } else if (wireType === LENGTH_DELIMITED) {
        // Packed: as many elements as the run holds.
        const end = cursor.delimited();
        counts[field] += packedCount(message, cursor.pos, end, elementType);
        cursor.pos = end;
      } else {
        throw malformed(`contents field ${field} has wire type ${wireType}`);
      }
    }
  }
  counts[CONTENTS_FIELD_NUMBER.bytes_contents] += bytesElements;
  return { message, ranges, counts, bytesContentBytes };
}

/** Elements in a packed run: fixed-size ones by division, varints by their last bytes. */
function packedCount(bytes: Uint8Array, start: number, end: number, elementType: number): number {
  if (elementType === FIXED32 || elementType === FIXED64) {
    const size = elementType === FIXED32 ? 4 : 8;
    if ((end - start) % size !== 0) throw malformed(`a packed run of ${size}-byte elements is ${end - start} bytes long`);
    return (end - start) / size;
  }
  if (end > start && bytes[end - 1]! >= 0x80) throw malformed('a packed varint runs past the end of its run');
  let n = 0;
  for (let i = start; i < end; i++) if (bytes[i]! < 0x80) n++;
  return n;
}
