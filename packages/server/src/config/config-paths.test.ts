import { describe, expect, it } from 'vitest';
import { configPaths } from './config-paths.ts';
import { parseModelConfig } from './parse.ts';

describe('configPaths', () => {
  it('lists every file path a config names, with the folder Triton reads it from', () => {
    const config = parseModelConfig(
      `name: "m"
default_model_filename: "weights.onnx"
cc_model_filenames { key: "7.5" value: "t4.onnx" }
output [ { name: "PROB" data_type: TYPE_FP32 dims: [ 3 ] label_filename: "labels.txt" }, { name: "RAW" data_type: TYPE_FP32 dims: [ 3 ] } ]
model_warmup [ { name: "w" inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 1 ] input_data_file: "x.bin" } } } ]
sequence_batching { state [ { input_name: "in" output_name: "out" data_type: TYPE_FP32 dims: [ 1 ]
  initial_state [ { name: "s" data_type: TYPE_FP32 dims: [ 1 ] data_file: "s.bin" } ] } ] }`,
      'config.pbtxt',
    );
    expect(configPaths(config)).toEqual([
      { field: 'default_model_filename', path: 'weights.onnx', under: 'version' },
      { field: "cc_model_filenames['7.5']", path: 't4.onnx', under: 'version' },
      { field: "label_filename of output 'PROB'", path: 'labels.txt', under: 'model' },
      { field: "input_data_file of warmup sample 'w' input 'X'", path: 'x.bin', under: 'warmup' },
      { field: "data_file of initial_state 's'", path: 's.bin', under: 'initial_state' },
    ]);
    expect(configPaths({ name: 'm', max_batch_size: 0, input: [], output: [] })).toEqual([]);
  });
});
