import { getHeapStatistics } from 'node:v8';
import { Errors, type InferenceService, type MemoryReservation } from '../core/index.ts';
import { jsonParseBytes } from '../memory/element-cost.ts';
import { countJsonArrays } from '../tensor/json-census.ts';

/**
 * The most one body's parse may create on the main thread's JavaScript heap: a quarter of its
 * limit. Past the heap limit V8 ends the process, whatever the memory budget allows.
 */
const MAX_PARSE_HEAP_BYTES = Math.floor(getHeapStatistics().heap_size_limit / 4);

/**
 * Before JSON.parse makes a value of every element of a body's arrays: the values are counted on
 * the bytes (json-census.ts), checked against the element limits (core) and the heap, and what the
 * parse will create is charged to the request's reservation, so a body that would not fit is
 * refused before anything is parsed. The decoded tensors are charged after the parse.
 */
export function admitJsonBody(
  service: InferenceService,
  memory: MemoryReservation,
  target: { readonly modelName: string; readonly modelVersion?: string },
  json: Uint8Array,
): void {
  const census = countJsonArrays(json);
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
