import { describe, expect, it } from 'vitest';
import { GraphBuilder, onnx, onnxElemType, parseModel, serializeModel, tritonConfigType } from './graph-builder.ts';

describe('GraphBuilder', () => {
  it('writes ir_version 8, opset 17 and the producer', () => {
    const g = new GraphBuilder('g');
    g.input('X', 'FP32', ['batch', 3, -1]);
    g.op('Identity', ['X'], 'Y');
    g.output('Y', 'FP32', ['batch', 3, -1]);
    // toObject types its result loosely; this is the shape the assertions read.
    const m = onnx.ModelProto.toObject(parseModel(serializeModel(g.build())), { longs: Number }) as {
      irVersion: number;
      opsetImport: unknown[];
      producerName: string;
      graph: { input: { type: { tensorType: { elemType: number; shape: { dim: unknown[] } } } }[] };
    };
    expect(m.irVersion).toBe(8);
    expect(m.opsetImport).toEqual([{ domain: '', version: 17 }]);
    expect(m.producerName).toBe('batchwise-modelgen');
    expect(m.graph.input[0].type.tensorType.elemType).toBe(onnx.TensorProto.DataType.FLOAT);
    expect(m.graph.input[0].type.tensorType.shape.dim).toEqual([{ dimParam: 'batch' }, { dimValue: 3 }, {}]);
  });

  it('decodes int64 fields as Long unless asked for numbers', () => {
    const m = parseModel(serializeModel(new GraphBuilder('g').build()));
    expect(typeof m.irVersion).toBe('object');
    expect(Number(m.irVersion)).toBe(8);
  });

  it('stores initializers as little-endian raw_data', () => {
    const g = new GraphBuilder('g');
    g.initializer('w', 'FP32', [2, 2], new Float32Array([1, 2, 3, 4]));
    const t = parseModel(serializeModel(g.build())).graph!.initializer![0];
    expect(t.dims!.map(Number)).toEqual([2, 2]);
    expect(t.dataType).toBe(onnx.TensorProto.DataType.FLOAT);
    expect(Buffer.from(t.rawData!).readFloatLE(12)).toBe(4);
  });

  it('rejects mismatched initializer sizes, bad dims and duplicate node names', () => {
    const g = new GraphBuilder('g');
    expect(() => g.initializer('w', 'FP32', [3], new Float32Array(2))).toThrow(/need 3 values/);
    expect(() => g.input('X', 'FP32', [-2])).toThrow(/invalid dimension/);
    g.node({ op: 'Relu', inputs: ['a'], outputs: ['b'], name: 'n' });
    expect(() => g.node({ op: 'Relu', inputs: ['b'], outputs: ['c'], name: 'n' })).toThrow(/duplicate/);
  });

  it('maps datatypes to ONNX and Triton names', () => {
    expect(onnxElemType('STRING')).toBe(onnx.TensorProto.DataType.STRING);
    expect(onnxElemType('FP16')).toBe(onnx.TensorProto.DataType.FLOAT16);
    expect(tritonConfigType('BYTES')).toBe('TYPE_STRING');
    expect(tritonConfigType('UINT64')).toBe('TYPE_UINT64');
  });
});
