/**
 * Tensors between the server's byte layout (protocol.ts slices; BYTES length-prefixed) and the
 * @batchwise/backend tensors model code sees (typed-array views in place; BYTES one Buffer per
 * element, views too). Runs in the worker.
 */
import { ARRAY_OF, tensor, type Tensor as ModelTensor } from '@batchwise/backend';
import type { DataType } from '../../tensor/datatype.ts';
import type { ByteTensor, WireSlice } from './protocol.ts';

export function toModelTensor(buffer: ArrayBuffer, slice: WireSlice): ModelTensor {
  const { name, datatype, shape } = slice;
  if (datatype === 'BYTES') return { name, datatype, shape, data: bytesElements(buffer, slice) };
  // BF16 is not a datatype of the model API; its elements are shown as their 16 bits.
  const ArrayClass = datatype === 'BF16' ? Uint16Array : ARRAY_OF[datatype];
  const data = new ArrayClass(buffer, slice.offset, slice.byteLength / ArrayClass.BYTES_PER_ELEMENT);
  return { name, datatype: datatype as ModelTensor['datatype'], shape, data };
}

function bytesElements(buffer: ArrayBuffer, slice: WireSlice): Buffer[] {
  const view = new DataView(buffer, slice.offset, slice.byteLength);
  const elements: Buffer[] = [];
  let offset = 0;
  while (offset < slice.byteLength) {
    const length = view.getUint32(offset, true);
    elements.push(Buffer.from(buffer, slice.offset + offset + 4, length));
    offset += 4 + length;
  }
  return elements;
}

/** A tensor model code made (checked and converted by @batchwise/backend's tensor()), in the server's byte layout. */
export function toByteTensor(value: unknown): ByteTensor {
  if (typeof value !== 'object' || value === null) throw new Error(`an output is ${String(value)}, not a tensor`);
  const given = value as Partial<ModelTensor>;
  if (typeof given.name !== 'string') throw new Error('an output tensor has no name');
  if (!Array.isArray(given.shape)) throw new Error(`output tensor '${given.name}' has no shape array`);
  const checked = tensor(given.name, given.datatype as ModelTensor['datatype'], given.shape, given.data as ModelTensor['data']);
  const datatype = checked.datatype as DataType;
  if (datatype === 'BYTES') return { name: checked.name, datatype, shape: checked.shape, data: serialize(checked.data as Buffer[]) };
  const typed = checked.data as Exclude<ModelTensor['data'], Buffer[]>;
  return { name: checked.name, datatype, shape: checked.shape, data: new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength) };
}

function serialize(elements: readonly Buffer[]): Uint8Array {
  let bytes = 0;
  for (const e of elements) bytes += 4 + e.byteLength;
  const out = new Uint8Array(bytes);
  const view = new DataView(out.buffer);
  let offset = 0;
  for (const e of elements) {
    view.setUint32(offset, e.byteLength, true);
    out.set(e, offset + 4);
    offset += 4 + e.byteLength;
  }
  return out;
}
