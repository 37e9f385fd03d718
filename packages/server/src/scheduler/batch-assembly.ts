import { deserializeBytesElements } from '../tensor/bytes-codec.ts';
import { elementCount } from '../tensor/shape.ts';
import type { Tensor } from '../tensor/tensor.ts';

/**
 * One contiguous buffer per input for a batch: each request's rows copied once with
 * `Uint8Array.set`, shape [sum of batch sizes, ...dims]. BYTES concatenate as they are
 * (each element carries its own length).
 */
export function assembleBatch(requests: readonly (readonly Tensor[])[], batchSizes: readonly number[]): Tensor[] {
  const first = requests[0]!;
  if (requests.length === 1) return [...first];
  const total = batchSizes.reduce((a, b) => a + b, 0);
  return first.map((input, i) => {
    let bytes = 0;
    for (const r of requests) bytes += r[i]!.data.byteLength;
    const data = new Uint8Array(bytes);
    let offset = 0;
    for (const r of requests) {
      data.set(r[i]!.data, offset);
      offset += r[i]!.data.byteLength;
    }
    return { name: input.name, datatype: input.datatype, shape: [total, ...input.shape.slice(1)], data };
  });
}

/** Splits batched outputs back into each request's rows, as views (no copies). */
export function splitOutputs(outputs: readonly Tensor[], batchSizes: readonly number[]): Tensor[][] {
  if (batchSizes.length === 1) return [[...outputs]];
  const total = batchSizes.reduce((a, b) => a + b, 0);
  const perRequest: Tensor[][] = batchSizes.map(() => []);
  for (const output of outputs) {
    const rows = output.shape[0] ?? 0;
    if (rows !== total) {
      throw new Error(`output '${output.name}' has ${rows} rows for a batch of ${total}: the model does not batch along its first dimension`);
    }
    const rowBoundaries = byteOffsetsOfRows(output, total);
    let row = 0;
    batchSizes.forEach((size, i) => {
      const start = rowBoundaries[row]!;
      const end = rowBoundaries[row + size]!;
      perRequest[i]!.push({
        name: output.name,
        datatype: output.datatype,
        shape: [size, ...output.shape.slice(1)],
        data: output.data.subarray(start, end),
      });
      row += size;
    });
  }
  return perRequest;
}

/** Byte offset where each row starts, plus the end: rows+1 entries. */
function byteOffsetsOfRows(tensor: Tensor, rows: number): number[] {
  const offsets = new Array<number>(rows + 1);
  if (tensor.datatype !== 'BYTES') {
    const rowBytes = rows === 0 ? 0 : tensor.data.byteLength / rows;
    for (let r = 0; r <= rows; r++) offsets[r] = r * rowBytes;
    return offsets;
  }
  const perRow = rows === 0 ? 0 : elementCount(tensor.shape) / rows;
  const elements = deserializeBytesElements(tensor.data, tensor.name);
  const base = tensor.data.byteOffset;
  offsets[0] = 0;
  for (let r = 1; r <= rows; r++) {
    const last = elements[r * perRow - 1];
    offsets[r] = last ? last.byteOffset + last.byteLength - base : offsets[r - 1]!;
  }
  return offsets;
}
