import { isUtf8 } from 'node:buffer';
import { forEachBytesElement } from '../../tensor/bytes-codec.ts';

/**
 * The elements of a BYTES tensor as the strings of an ONNX Runtime string tensor, decoded straight
 * from the length-prefixed layout: one string per element and nothing else (a view per element
 * would double what a tensor of millions of short strings costs the worker's heap). ONNX Runtime
 * strings hold text, so what would not survive the trip unchanged is refused: a NUL byte, or
 * bytes that are not valid UTF-8 (checked only where decoding produced U+FFFD).
 */
export function ortStringsOf(data: Uint8Array, tensorName: string): string[] {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const strings: string[] = [];
  forEachBytesElement(data, tensorName, (start, end) => {
    const text = bytes.toString('utf8', start, end);
    const index = strings.length;
    if (text.includes('\0')) {
      throw new Error(`element ${index} of BYTES input '${tensorName}' contains a NUL byte, which ONNX Runtime string tensors cannot hold`);
    }
    if (text.includes('\uFFFD') && !isUtf8(bytes.subarray(start, end))) {
      throw new Error(`element ${index} of BYTES input '${tensorName}' is not valid UTF-8, which ONNX Runtime string tensors require`);
    }
    strings.push(text);
  });
  return strings;
}
