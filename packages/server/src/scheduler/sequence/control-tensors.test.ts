import { describe, expect, it } from 'vitest';
import type { SequenceControls } from '../../config/sequence-batching.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { controlTensors, NOT_READY } from './control-tensors.ts';

const read = (t: Tensor): unknown[] => {
  const { buffer } = t.data.slice();
  switch (t.datatype) {
    case 'INT32':
      return Array.from(new Int32Array(buffer));
    case 'UINT32':
      return Array.from(new Uint32Array(buffer));
    case 'FP32':
      return Array.from(new Float32Array(buffer));
    case 'BOOL':
      return Array.from(t.data);
    case 'UINT64':
      return Array.from(new BigUint64Array(buffer));
    case 'INT64':
      return Array.from(new BigInt64Array(buffer));
    default: {
      const out: string[] = [];
      for (let at = 0; at < t.data.length;) {
        const length = new DataView(buffer).getUint32(at, true);
        out.push(Buffer.from(t.data.subarray(at + 4, at + 4 + length)).toString());
        at += 4 + length;
      }
      return out;
    }
  }
};

describe('control tensors', () => {
  const slots = [
    { ready: true, start: true, end: false, id: 2n ** 64n - 1n },
    NOT_READY,
    { ready: true, start: true, end: true, id: 5n },
    { ready: true, start: false, end: true, id: 2n ** 32n + 7n },
  ];

  it('START, END and READY in INT32, FP32 and BOOL with their false/true values, [slots, 1] for a batching model', () => {
    const controls: SequenceControls = {
      start: { name: 'S', datatype: 'INT32', falseValue: -1, trueValue: 7 },
      end: { name: 'E', datatype: 'FP32', falseValue: 0.5, trueValue: 2.5 },
      ready: { name: 'R', datatype: 'BOOL', falseValue: 0, trueValue: 1 },
    };
    const tensors = controlTensors(controls, slots, true);
    expect(tensors.map((t) => [t.name, t.datatype, t.shape, read(t)])).toEqual([
      ['S', 'INT32', [4, 1], [7, -1, 7, -1]],
      ['E', 'FP32', [4, 1], [0.5, 0.5, 2.5, 2.5]],
      ['R', 'BOOL', [4, 1], [1, 0, 1, 1]],
    ]);
  });

  it('CORRID in each datatype Triton allows, its low bytes as Triton copies them; a null slot 0', () => {
    const corrid = (datatype: 'UINT64' | 'INT64' | 'UINT32' | 'INT32') =>
      read(controlTensors({ corrid: { name: 'C', datatype } }, slots, true)[0]!);
    expect(corrid('UINT64')).toEqual([2n ** 64n - 1n, 0n, 5n, 2n ** 32n + 7n]);
    expect(corrid('INT64')).toEqual([-1n, 0n, 5n, 2n ** 32n + 7n]);
    expect(corrid('UINT32')).toEqual([2 ** 32 - 1, 0, 5, 7]);
    expect(corrid('INT32')).toEqual([-1, 0, 5, 7]);
  });

  it('a string CORRID as BYTES (a null slot the empty string), and shape [1] for a model that does not batch', () => {
    const [tensor] = controlTensors(
      { corrid: { name: 'C', datatype: 'BYTES' } },
      [{ ready: true, start: true, end: false, id: 'séq' }, NOT_READY],
      true,
    );
    expect(read(tensor!)).toEqual(['séq', '']);
    const [alone] = controlTensors({ start: { name: 'S', datatype: 'INT32', falseValue: 0, trueValue: 1 } }, [slots[0]!], false);
    expect(alone!.shape).toEqual([1]);
  });
});
