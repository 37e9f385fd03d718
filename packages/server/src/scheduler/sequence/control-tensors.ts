import type { BooleanControl, CorridControl, SequenceControls } from '../../config/sequence-batching.ts';
import { serializeBytesElements } from '../../tensor/bytes-codec.ts';
import type { Tensor } from '../../tensor/tensor.ts';

/** What the sequence batcher tells the model about one batch slot (Triton's SetControlTensors). */
export interface SlotSignal {
  /** false: the slot holds no request in this batch (a null request): every flag false, the CORRID 0. */
  readonly ready: boolean;
  readonly start: boolean;
  readonly end: boolean;
  readonly id: bigint | string;
}

export const NOT_READY: SlotSignal = { ready: false, start: false, end: false, id: 0n };

/**
 * The control tensors of a batch, one element per slot, in the order START, END, READY, CORRID
 * (those the config names): shape [slots, 1] for a model that batches, [1] for one that does not,
 * as Triton's sequence batcher shapes them.
 */
export function controlTensors(controls: SequenceControls, slots: readonly SlotSignal[], batching: boolean): Tensor[] {
  const shape = batching ? [slots.length, 1] : [1];
  const tensors: Tensor[] = [];
  const flag = (control: BooleanControl | undefined, pick: (s: SlotSignal) => boolean) => {
    if (control) tensors.push(booleanTensor(control, slots.map(pick), shape));
  };
  flag(controls.start, (s) => s.ready && s.start);
  flag(controls.end, (s) => s.ready && s.end);
  flag(controls.ready, (s) => s.ready);
  if (controls.corrid) tensors.push(corridTensor(controls.corrid, slots, shape));
  return tensors;
}

function booleanTensor(control: BooleanControl, values: readonly boolean[], shape: number[]): Tensor {
  const size = control.datatype === 'BOOL' ? 1 : 4;
  const data = new Uint8Array(values.length * size);
  const view = new DataView(data.buffer);
  values.forEach((on, i) => {
    const value = on ? control.trueValue : control.falseValue;
    if (control.datatype === 'INT32') view.setInt32(i * 4, value, true);
    else if (control.datatype === 'FP32') view.setFloat32(i * 4, value, true);
    else data[i] = value ? 1 : 0;
  });
  return { name: control.name, datatype: control.datatype, shape, data };
}

/**
 * Each slot's correlation id in the control's datatype. A numeric id is written as Triton copies
 * it, its low bytes: INT64 reads a uint64 past 2^63 as negative, UINT32 and INT32 keep the low 32
 * bits. A string id is one BYTES element (config validation keeps numeric ids from BYTES controls
 * and string ids from numeric ones); a null slot's id is 0, or the empty string.
 */
function corridTensor(control: CorridControl, slots: readonly SlotSignal[], shape: number[]): Tensor {
  if (control.datatype === 'BYTES') {
    const data = serializeBytesElements(slots.map((s) => (s.ready && typeof s.id === 'string' ? s.id : '')));
    return { name: control.name, datatype: 'BYTES', shape, data };
  }
  const wide = control.datatype === 'UINT64' || control.datatype === 'INT64';
  const data = new Uint8Array(slots.length * (wide ? 8 : 4));
  const view = new DataView(data.buffer);
  slots.forEach((s, i) => {
    const id = s.ready && typeof s.id === 'bigint' ? s.id : 0n;
    if (wide) view.setBigUint64(i * 8, BigInt.asUintN(64, id), true);
    else view.setUint32(i * 4, Number(BigInt.asUintN(32, id)), true);
  });
  return { name: control.name, datatype: control.datatype, shape, data };
}
