/**
 * What tensor elements cost where they become JavaScript or native objects, per element, known
 * from counts before the objects exist. Measured on Node 20 and onnxruntime-node 1.30 (2026-11-24,
 * heap and RSS growth per element over 1-2 million elements; the figures err high).
 */

/**
 * One BYTES element as an ONNX Runtime string in a model instance's worker, each way (an input
 * handed to ONNX Runtime, an output taken back): its JavaScript string and its slot in the array,
 * and ONNX Runtime's std::string. Through an identity model, one-byte elements cost 94 bytes of
 * RSS each both ways, 20-byte ones 338, 200-byte ones 1289: about 256 + 6 per byte of content.
 */
export const STRING_ELEMENT_BYTES = 128;
/** ... and per byte of its content each way: the JavaScript string (up to 2 bytes a byte as UTF-16) and ONNX Runtime's copy. */
export const STRING_CONTENT_BYTES_PER_BYTE = 3;

/** Of a string element, what lives on the worker's JavaScript heap: 10 to 30 bytes of header and slot each way, and its content. */
const STRING_HEAP_BYTES = 32;
const STRING_HEAP_BYTES_PER_BYTE = 2;

/**
 * A value JSON.parse creates inside a data array: its slot and its object (a number's box, a
 * string's header; a nested array). Measured 10 to 64 bytes of heap and up to 113 of RSS per value
 * (nested one-element rows the most); string content is charged apart, with the text.
 */
export const JSON_VALUE_BYTES = 64;

/** Memory BYTES elements take as ONNX Runtime strings, one way (inputs, or outputs), bytes. */
export function stringConversionBytes(elements: number, contentBytes: number): number {
  return elements * STRING_ELEMENT_BYTES + contentBytes * STRING_CONTENT_BYTES_PER_BYTE;
}

/**
 * The worker's JavaScript heap that BYTES inputs take as ONNX Runtime strings, with outputs as many
 * and as large (identity and elementwise models echo them), bytes. A batch must fit in
 * stringHeapCapacityBytes of the instance, or its worker dies of heap exhaustion.
 */
export function stringHeapBytes(elements: number, contentBytes: number): number {
  return 2 * (elements * STRING_HEAP_BYTES + contentBytes * STRING_HEAP_BYTES_PER_BYTE);
}

/**
 * The most stringHeapBytes one batch may take in a model instance whose worker's heap is limited
 * to `heapLimitBytes`: half of it, leaving the rest to the session, garbage not yet collected and
 * the serialized outputs. Infinity when the heap is not limited (or there are no strings to hold).
 */
export function stringHeapCapacityBytes(heapLimitBytes: number | undefined): number {
  return heapLimitBytes === undefined ? Infinity : Math.floor(heapLimitBytes / 2);
}

/** The content bytes of `elements` BYTES elements held in `dataBytes` of the length-prefixed layout. */
export function bytesTensorContent(elements: number, dataBytes: number): number {
  return Math.max(0, dataBytes - 4 * elements);
}

/**
 * What JSON.parse creates from a request body: the text as a JavaScript string (one byte a
 * character, two when any is outside ASCII), JSON_VALUE_BYTES per value in its arrays, and the
 * content of its strings (up to two bytes a byte), bytes.
 */
export function jsonParseBytes(textBytes: number, twoByteText: boolean, values: number, stringBytes: number): number {
  return textBytes * (twoByteText ? 2 : 1) + values * JSON_VALUE_BYTES + stringBytes * 2;
}
