import { describe, expect, it } from 'vitest';
import { parseModelConfig } from '../../config/parse.ts';
import { requestInputs } from './inputs.ts';

describe('requestInputs', () => {
  it('makes one request of batch 1 with variable dimensions as 1, leaving optional inputs out', () => {
    const config = parseModelConfig(`name: "m"
max_batch_size: 8
input [
  { name: "A" data_type: TYPE_FP32 dims: [ 2, -1 ] },
  { name: "B" data_type: TYPE_INT64 dims: [ 3 ] },
  { name: "C" data_type: TYPE_STRING dims: [ 2 ] },
  { name: "D" data_type: TYPE_BOOL dims: [ 1 ] },
  { name: "E" data_type: TYPE_FP32 dims: [ 1 ] optional: true }
]
output [{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }]
`);
    const inputs = requestInputs(config);
    expect(inputs.map((i) => [i.name, i.datatype, i.shape])).toEqual([
      ['A', 'FP32', [1, 2, 1]],
      ['B', 'INT64', [1, 3]],
      ['C', 'BYTES', [1, 2]],
      ['D', 'BOOL', [1, 1]],
    ]);
    expect(inputs[0]!.data).toEqual(new Float32Array([0, 1]));
    expect(inputs[1]!.data).toEqual(new BigInt64Array([0n, 1n, 2n]));
    expect(inputs[2]!.data).toEqual(['tune 0', 'tune 1']);
  });

  it('sends no batch dimension to a model that does not batch', () => {
    const config = parseModelConfig(`name: "m"
max_batch_size: 0
input [{ name: "A" data_type: TYPE_UINT8 dims: [ 4 ] }]
output [{ name: "Y" data_type: TYPE_UINT8 dims: [ 4 ] }]
`);
    expect(requestInputs(config)[0]).toEqual({ name: 'A', datatype: 'UINT8', shape: [4], data: new Uint8Array([0, 1, 2, 3]) });
  });
});
