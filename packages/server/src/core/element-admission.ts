import { bytesTensorContent, stringHeapBytes } from '../memory/element-cost.ts';
import { countBytesElements } from '../tensor/bytes-codec.ts';
import { elementCount, formatShape } from '../tensor/shape.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { Errors } from '../errors/errors.ts';
import type { LoadedVersion } from '../models/loaded-version.ts';

/**
 * Bounds on how many elements one request may carry, checked before what they cost exists:
 * frontends call these through InferenceService.admitElements with what they counted before
 * decoding, and infer() with the validated shapes, before the request is queued.
 */

/** --max-request-elements: more elements than the flag allows are refused outright (INVALID_ARG). */
export function checkElementCount(elements: number, maxRequestElements: number): void {
  if (elements > maxRequestElements) {
    throw Errors.invalidArg(
      `the request has ${elements} tensor elements; at most ${maxRequestElements} are allowed per request (--max-request-elements)`,
    );
  }
}

/** An input whose dims are all fixed takes at most max_batch_size (or 1) times their product elements. */
export function checkInputElements(model: LoadedVersion, input: string, elements: number): void {
  const spec = model.inputsByName.get(input);
  if (!spec || spec.dims.some((d) => d < 0)) return;
  const batch = Math.max(1, model.maxBatchSize);
  const most = batch * elementCount(spec.dims);
  if (elements > most) {
    const shape = model.maxBatchSize > 0 ? `max_batch_size ${batch} x ${formatShape(spec.dims)}` : formatShape(spec.dims);
    throw Errors.invalidArg(`input '${input}' has ${elements} elements, but model '${model.modelName}' takes at most ${most} (${shape})`);
  }
}

/**
 * BYTES elements become one string each in a model instance's worker, whose heap is limited: a
 * request that alone would fill the room one batch has there is refused, rather than sent to a
 * worker that would die of it (batches of several requests stop growing at that room, see
 * chooseBatch). Returns the heap the strings take, for the scheduler.
 */
export function checkStringElements(model: LoadedVersion, elements: number, contentBytes: number): number {
  const heap = stringHeapBytes(elements, contentBytes);
  const room = model.maxBatchStringHeapBytes;
  if (heap > room) {
    const most = Math.floor((elements * room) / heap);
    throw Errors.invalidArg(
      `the request's ${elements} BYTES elements (${contentBytes} bytes) would take about ${heap} bytes of a model instance's JavaScript heap ` +
        `as ONNX Runtime strings; a batch may take ${room} (half the instance's heap limit, from --memory-limit), about ${most} such elements`,
    );
  }
  return heap;
}

/**
 * The string check on a request's BYTES inputs as received, before validation walks them: their
 * elements are counted on the length-prefixed layout (no object per element), and only inputs the
 * model takes as BYTES count (others fail validation as they are). Returns the heap the strings
 * take in the worker, for the scheduler.
 */
export function checkRequestStrings(model: LoadedVersion, inputs: readonly Tensor[]): number {
  let elements = 0;
  let contentBytes = 0;
  for (const input of inputs) {
    if (input.datatype !== 'BYTES' || model.inputsByName.get(input.name)?.datatype !== 'BYTES') continue;
    const n = countBytesElements(input.data, input.name);
    elements += n;
    contentBytes += bytesTensorContent(n, input.data.byteLength);
  }
  return elements > 0 ? checkStringElements(model, elements, contentBytes) : 0;
}

/** --max-request-elements on a validated request's tensors. */
export function checkValidatedElements(inputs: readonly Tensor[], maxRequestElements: number): void {
  let elements = 0;
  for (const input of inputs) elements += elementCount(input.shape);
  checkElementCount(elements, maxRequestElements);
}
