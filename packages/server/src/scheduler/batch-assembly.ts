import { Errors } from '../errors/errors.ts';
import { elementCount } from '../tensor/shape.ts';
import type { Tensor } from '../tensor/tensor.ts';

/**
 * One contiguous buffer per input for a batch: each request's bytes copied once with
 * `Uint8Array.set`, shape [sum of batch sizes, ...dims]. BYTES concatenate as they are (each
 * element carries its own length). A batch of one is copied too: the buffer then belongs to
 * the batch alone, so the backend can transfer it to its worker without detaching memory a
 * caller still holds (a received body, a pooled buffer).
 *
 * A batch of one keeps each input's shape as it is: a model without batching
 * (max_batch_size 0) has no batch dimension to rewrite, and its first dimension is data.
 * Only batching models (whose first dimension is the request's batch size) ever batch
 * several requests together.
 */
export function assembleBatch(requests: readonly (readonly Tensor[])[], batchSizes: readonly number[]): Tensor[] {
  let total = 0;
  for (const size of batchSizes) total += size;
  const alone = requests.length === 1;
  return requests[0]!.map((input, i) => {
    let bytes = 0;
    for (const r of requests) bytes += r[i]!.data.byteLength;
    const data = new Uint8Array(bytes);
    let offset = 0;
    for (const r of requests) {
      data.set(r[i]!.data, offset);
      offset += r[i]!.data.byteLength;
    }
    const shape = alone ? input.shape : [total, ...input.shape.slice(1)];
    return { name: input.name, datatype: input.datatype, shape, data };
  });
}

/** Splits batched outputs back into each request's rows, as views on the output buffers (no copies). */
export function splitOutputs(outputs: readonly Tensor[], batchSizes: readonly number[]): Tensor[][] {
  if (batchSizes.length === 1) return [[...outputs]];
  let total = 0;
  for (const size of batchSizes) total += size;
  const perRequest: Tensor[][] = batchSizes.map(() => []);
  for (const output of outputs) {
    const rows = output.shape[0] ?? 0;
    if (rows !== total) {
      throw Errors.internal(
        `output '${output.name}' has ${rows} rows for a batch of ${total}: the model does not batch along its first dimension`,
      );
    }
    const boundaries = output.datatype === 'BYTES' ? bytesRowBoundaries(output, total) : fixedRowBoundaries(output, total);
    let row = 0;
    for (let i = 0; i < batchSizes.length; i++) {
      const size = batchSizes[i]!;
      perRequest[i]!.push({
        name: output.name,
        datatype: output.datatype,
        shape: [size, ...output.shape.slice(1)],
        data: output.data.subarray(boundaries[row]!, boundaries[row + size]!),
      });
      row += size;
    }
  }
  return perRequest;
}

/** Byte offset where each row starts, then the end: rows+1 entries. */
function fixedRowBoundaries(tensor: Tensor, rows: number): number[] {
  const rowBytes = tensor.data.byteLength / rows;
  if (!Number.isInteger(rowBytes)) {
    throw Errors.internal(`output '${tensor.name}' has ${tensor.data.byteLength} bytes, not a whole number of its ${rows} rows`);
  }
  const offsets = new Array<number>(rows + 1);
  for (let r = 0; r <= rows; r++) offsets[r] = r * rowBytes;
  return offsets;
}

/** The same for BYTES: one walk over the length prefixes, noting where each row ends. */
function bytesRowBoundaries(tensor: Tensor, rows: number): number[] {
  const { data } = tensor;
  const perRow = elementCount(tensor.shape) / rows;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const offsets = new Array<number>(rows + 1);
  offsets[0] = 0;
  const malformed = () =>
    Errors.internal(`BYTES output '${tensor.name}' does not hold the ${elementCount(tensor.shape)} elements its shape declares`);
  let offset = 0;
  for (let r = 1; r <= rows; r++) {
    for (let e = 0; e < perRow; e++) {
      if (offset + 4 > data.byteLength) throw malformed();
      offset += 4 + view.getUint32(offset, true);
    }
    offsets[r] = offset;
  }
  if (offset !== data.byteLength) throw malformed();
  return offsets;
}
