/**
 * The KServe BYTES layout (@batchwise/protocol, shared with the client) with the server's error:
 * a malformed layout is INVALID_ARG, naming the tensor and the element.
 */
import * as layout from '@batchwise/protocol';
import { Errors } from '../errors/errors.ts';

export { serializeBytesElements } from '@batchwise/protocol';

function asInvalidArg<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    throw layout.isProtocolError(error) ? Errors.invalidArg(error.message) : error;
  }
}

/** The elements as views on `data` (no copies). */
export function deserializeBytesElements(data: Uint8Array, tensorName: string): Uint8Array[] {
  return asInvalidArg(() => layout.deserializeBytesElements(data, tensorName));
}

export function countBytesElements(data: Uint8Array, tensorName: string): number {
  return asInvalidArg(() => layout.countBytesElements(data, tensorName));
}

/** The elements decoded as UTF-8 (invalid sequences become U+FFFD, as TextDecoder does), with no view per element. */
export function bytesElementsToStrings(data: Uint8Array, tensorName: string): string[] {
  return asInvalidArg(() => layout.bytesElementsToStrings(data, tensorName));
}

/** The index of the first element that is not text (UTF-8 without NUL bytes), or -1. */
export function firstNonTextElement(data: Uint8Array, tensorName: string): number {
  return asInvalidArg(() => layout.firstNonTextElement(data, tensorName));
}

/** Calls `visit` with the byte range of each element's content in `data`, in order; refuses a malformed layout. */
export function forEachBytesElement(data: Uint8Array, tensorName: string, visit: (start: number, end: number) => void): void {
  asInvalidArg(() => layout.forEachBytesElement(data, tensorName, visit));
}
