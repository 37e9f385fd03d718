import { Transform } from 'node:stream';
import { getHeapStatistics } from 'node:v8';
import { Errors, jsonParseBytes, type InferenceService, type MemoryReservation } from '../core/index.ts';
import { countJsonArrays, JsonArrayCounter } from '../tensor/json-census.ts';

/**
 * The most one body's parse may create on the main thread's JavaScript heap: a quarter of its
 * limit. Past the heap limit V8 ends the process, whatever the memory budget allows.
 */
const MAX_PARSE_HEAP_BYTES = Math.floor(getHeapStatistics().heap_size_limit / 4);

/**
 * Before JSON.parse makes a value of every element of a body's arrays: the values are counted on
 * the bytes (json-census.ts), checked against the element limits (core) and the heap, and what the
 * parse will create is charged to the request's reservation, so a body that would not fit is
 * refused before anything is parsed. The decoded tensors are charged after the parse. `counted`:
 * the values as counted while the body arrived (countJsonWhileReceived), used when it saw all of `json`.
 */
export function admitJsonBody(
  service: InferenceService,
  memory: MemoryReservation,
  target: { readonly modelName: string; readonly modelVersion?: string },
  json: Uint8Array,
  counted?: JsonArrayCounter,
): void {
  const census = counted?.bytes === json.byteLength ? counted.census : countJsonArrays(json);
  const values = census.values + census.containers;
  const parseBytes = jsonParseBytes(json.byteLength, census.nonAscii, values, census.stringBytes);
  if (parseBytes > MAX_PARSE_HEAP_BYTES) {
    throw Errors.invalidArg(
      `the request's JSON holds ${values} values in arrays, which would take about ${parseBytes} bytes of the server's JavaScript heap once parsed; ` +
        `one request may take ${MAX_PARSE_HEAP_BYTES} (a quarter of its heap limit): send large tensors as binary data (binary_data_size)`,
    );
  }
  service.admitElements(memory, target, {
    elements: census.values,
    stringElements: census.strings,
    stringBytes: census.stringBytes,
    inputs: [],
    decodeBytes: parseBytes,
  });
}

/**
 * Uncompressed bodies whose Content-Length is at most this are counted in one pass once complete
 * (under a millisecond) rather than through a counting stream, which costs every request its setup;
 * the direct infer path (direct-infer.ts) reads no larger body for the same reason.
 */
export const COUNT_WHILE_RECEIVED_MIN_BYTES = 256 * 1024;

/**
 * Counts the values of a body's JSON while the body arrives, so that they are counted by the time
 * it is complete and a refusal follows its last byte at once, rather than after a pass over it
 * (a 40 MB body took up to a second on busy cores). `jsonBytes`: how much of the body is JSON (the
 * binary extension's header length); undefined: all of it.
 */
export function countJsonWhileReceived(
  payload: NodeJS.ReadableStream,
  jsonBytes: number | undefined,
): { stream: NodeJS.ReadableStream; counter: JsonArrayCounter } {
  const counter = new JsonArrayCounter();
  let left = jsonBytes ?? Infinity;
  const counting = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (left > 0) {
        counter.write(left >= chunk.length ? chunk : chunk.subarray(0, left));
        left -= chunk.length;
      }
      callback(null, chunk);
    },
  });
  payload.on('error', (error) => counting.destroy(error));
  // fastify compares Content-Length with the encoded bytes content-encoding.ts counts, when present.
  Object.defineProperty(counting, 'receivedEncodedLength', {
    get: () => (payload as { receivedEncodedLength?: number }).receivedEncodedLength,
  });
  return { stream: payload.pipe(counting), counter };
}
