import { isUtf8 } from 'node:buffer';
import { ProtocolError } from './protocol-error.ts';

/**
 * KServe BYTES serialization: each element a 4-byte little-endian length, then its bytes. Strings
 * are encoded straight into the result (as UTF-8, lone surrogates as U+FFFD like TextEncoder),
 * with no array of their own per element: a tensor of millions of short strings would otherwise
 * hold an object per element on top of its bytes.
 */
export function serializeBytesElements(elements: readonly (Uint8Array | string)[]): Uint8Array {
  let total = 0;
  for (const e of elements) total += 4 + (typeof e === 'string' ? Buffer.byteLength(e, 'utf8') : e.byteLength);
  // Every byte is written below; allocUnsafeSlow is never a slice of Node's shared pool.
  const out = Buffer.allocUnsafeSlow(total);
  let offset = 0;
  for (const e of elements) {
    let length = e.length;
    if (typeof e === 'string') length = out.write(e, offset + 4, 'utf8');
    else out.set(e, offset + 4);
    out.writeUInt32LE(length, offset);
    offset += 4 + length;
  }
  return new Uint8Array(out.buffer, out.byteOffset, total);
}

/** The elements as views on `data` (no copies). */
export function deserializeBytesElements(data: Uint8Array, tensorName: string): Uint8Array[] {
  const elements: Uint8Array[] = [];
  forEachBytesElement(data, tensorName, (start, end) => elements.push(data.subarray(start, end)));
  return elements;
}

export function countBytesElements(data: Uint8Array, tensorName: string): number {
  let n = 0;
  forEachBytesElement(data, tensorName, () => n++);
  return n;
}

/** The elements decoded as UTF-8 (invalid sequences become U+FFFD, as TextDecoder does), with no view per element. */
export function bytesElementsToStrings(data: Uint8Array, tensorName: string): string[] {
  const text = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const strings: string[] = [];
  forEachBytesElement(data, tensorName, (start, end) => strings.push(text.toString('utf8', start, end)));
  return strings;
}

/**
 * The index of the first element that is not text (UTF-8 without NUL bytes), or -1, checked on
 * the layout without an object per element (only an element outside ASCII is looked at as a view).
 */
export function firstNonTextElement(data: Uint8Array, tensorName: string): number {
  let index = 0;
  let found = -1;
  forEachBytesElement(data, tensorName, (start, end) => {
    if (found >= 0) return;
    let ascii = true;
    for (let i = start; i < end; i++) {
      const b = data[i]!;
      if (b === 0) {
        found = index;
        return;
      }
      if (b >= 0x80) ascii = false;
    }
    if (!ascii && !isUtf8(data.subarray(start, end))) found = index;
    index++;
  });
  return found;
}

/** Calls `visit` with the byte range of each element's content in `data`, in order; refuses a malformed layout (ProtocolError). */
export function forEachBytesElement(data: Uint8Array, tensorName: string, visit: (start: number, end: number) => void): void {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const size = data.byteLength;
  let offset = 0;
  let index = 0;
  while (offset < size) {
    if (offset + 4 > size) {
      throw new ProtocolError(
        `BYTES tensor '${tensorName}': element ${index} has a truncated 4-byte length prefix at byte ${offset} (only ${size - offset} bytes remain)`,
      );
    }
    const length = view.getUint32(offset, true);
    const start = offset + 4;
    if (length > size - start) {
      throw new ProtocolError(`BYTES tensor '${tensorName}': element ${index} declares ${length} bytes but only ${size - start} remain`);
    }
    visit(start, start + length);
    offset = start + length;
    index++;
  }
}
