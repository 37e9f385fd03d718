import { Errors } from '../core/errors.ts';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** KServe BYTES serialization: each element a 4-byte little-endian length, then its bytes. */
export function serializeBytesElements(elements: readonly (Uint8Array | string)[]): Uint8Array {
  const parts = elements.map((e) => (typeof e === 'string' ? encoder.encode(e) : e));
  let total = 0;
  for (const p of parts) total += 4 + p.byteLength;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let offset = 0;
  for (const p of parts) {
    view.setUint32(offset, p.byteLength, true);
    out.set(p, offset + 4);
    offset += 4 + p.byteLength;
  }
  return out;
}

/** The elements as views on `data` (no copies). */
export function deserializeBytesElements(data: Uint8Array, tensorName: string): Uint8Array[] {
  const elements: Uint8Array[] = [];
  walk(data, tensorName, (start, end) => elements.push(data.subarray(start, end)));
  return elements;
}

export function countBytesElements(data: Uint8Array, tensorName: string): number {
  let n = 0;
  walk(data, tensorName, () => n++);
  return n;
}

/** The elements decoded as UTF-8 (invalid sequences become U+FFFD). */
export function bytesElementsToStrings(data: Uint8Array, tensorName: string): string[] {
  const strings: string[] = [];
  walk(data, tensorName, (start, end) => strings.push(decoder.decode(data.subarray(start, end))));
  return strings;
}

function walk(data: Uint8Array, tensorName: string, visit: (start: number, end: number) => void): void {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const size = data.byteLength;
  let offset = 0;
  let index = 0;
  while (offset < size) {
    if (offset + 4 > size) {
      throw Errors.invalidArg(
        `BYTES tensor '${tensorName}': element ${index} has a truncated 4-byte length prefix at byte ${offset} (only ${size - offset} bytes remain)`,
      );
    }
    const length = view.getUint32(offset, true);
    const start = offset + 4;
    if (length > size - start) {
      throw Errors.invalidArg(
        `BYTES tensor '${tensorName}': element ${index} declares ${length} bytes but only ${size - start} remain`,
      );
    }
    visit(start, start + length);
    offset = start + length;
    index++;
  }
}
