import { describe, expect, it } from 'vitest';
import { parseModelConfig } from '../../config/index.ts';
import { serializeBytesElements } from '../../tensor/bytes-codec.ts';
import { OutputRules } from './output-check.ts';
import { packTensors, sliceBytes } from './protocol.ts';

const config = parseModelConfig(`name: "m" backend: "js" max_batch_size: 4
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1, 2 ] }, { name: "S" data_type: TYPE_STRING dims: [ 1 ] } ]`);
const rules = new OutputRules('m', config);
const fp32 = (shape: number[], values: number[]) => ({
  name: 'Y',
  datatype: 'FP32' as const,
  shape,
  data: new Uint8Array(new Float32Array(values).buffer),
});
const strings = (shape: number[], values: string[]) => ({
  name: 'S',
  datatype: 'BYTES' as const,
  shape,
  data: serializeBytesElements(values.map((v) => Buffer.from(v))),
});

describe('OutputRules', () => {
  it('returns the requested outputs in the order asked, batch dimension first', () => {
    const y = fp32([2, 3, 2], new Array(12).fill(0));
    const s = strings([2, 1], ['a', 'b']);
    expect(rules.select([y, s], ['S', 'Y'], 2)).toEqual([s, y]);
  });

  it('names the model and the output at fault', () => {
    expect(() => rules.select([fp32([1, 1, 2], [1, 2])], ['Y'], 2)).toThrow(
      "model 'm' output 'Y' has shape [1,1,2], but its config allows [2,-1,2] (2 rows for this request, then the config dims)",
    );
    expect(() => rules.select([{ ...fp32([1, 1, 2], [1, 2]), datatype: 'FP64' }], ['Y'], 1)).toThrow(
      "model 'm' output 'Y' is FP64, but its config declares FP32",
    );
    expect(() => rules.select([{ ...fp32([1, 1, 2], [1, 2]), name: 'Z' }], ['Y'], 1)).toThrow(
      "model 'm' returned output 'Z', which its config does not declare (declared: Y, S)",
    );
    expect(() => rules.select([fp32([1, 1, 2], [1, 2])], ['S'], 1)).toThrow(
      "model 'm' returned no output 'S', which the request asked for",
    );
    expect(() => rules.select([fp32([1, 2, 2], [1, 2])], ['Y'], 1)).toThrow(
      "model 'm' output 'Y' has 2 elements, but its shape [1,2,2] holds 4",
    );
  });
});

describe('packTensors', () => {
  it('copies each tensor once into one buffer, each slice 8-byte aligned so typed arrays can view it in place', () => {
    const a = { name: 'a', datatype: 'UINT8' as const, shape: [3], data: new Uint8Array([1, 2, 3]) };
    const b = { name: 'b', datatype: 'FP64' as const, shape: [1], data: new Uint8Array(new Float64Array([0.5]).buffer) };
    const { buffer, slices } = packTensors([[a], [b, a]]);
    expect(slices.map((g) => g.map((s) => s.offset))).toEqual([[0], [8, 16]]);
    expect(new Float64Array(buffer, slices[1]![0]!.offset, 1)[0]).toBe(0.5);
    expect(Array.from(sliceBytes(buffer, slices[1]![1]!))).toEqual([1, 2, 3]);
  });
});
