import { describe, expect, it } from 'vitest';
import { TENSOR_DATATYPES, parseModel, serializeModel, type ModelProto, type TensorDatatype } from './graph-builder.ts';
import { convNet, fixedBatchModel, identity, mlp, simpleAddSub, slowModel } from './models.ts';
import { ORT_TYPES, loadOrt, type OrtSession } from '../test-support/ort.ts';

const ort = loadOrt();
const session = (m: ModelProto): Promise<OrtSession> => ort.InferenceSession.create(serializeModel(m));
const f32 = (dims: number[], fill = (i: number) => Math.sin(i)): InstanceType<typeof ort.Tensor> => {
  const n = dims.reduce((a, b) => a * b, 1);
  return new ort.Tensor(
    'float32',
    Float32Array.from({ length: n }, (_, i) => fill(i)),
    dims,
  );
};

function sampleData(dt: TensorDatatype, n: number): unknown {
  const ints = Array.from({ length: n }, (_, i) => i * 7 - 3);
  switch (dt) {
    case 'BOOL':
      return Uint8Array.from(ints, (v) => v & 1);
    case 'UINT8':
      return Uint8Array.from(ints, (v) => v + 100);
    case 'UINT16':
      return Uint16Array.from(ints, (v) => v + 60000);
    case 'UINT32':
      return Uint32Array.from(ints, (v) => v + 4e9);
    case 'UINT64':
      return BigUint64Array.from(ints, (v) => BigInt(v + 3) + (1n << 63n));
    case 'INT8':
      return Int8Array.from(ints);
    case 'INT16':
      return Int16Array.from(ints, (v) => v - 30000);
    case 'INT32':
      return Int32Array.from(ints, (v) => v - 2e9);
    case 'INT64':
      return BigInt64Array.from(ints, (v) => BigInt(v) - (1n << 62n));
    case 'FP16':
      return Uint16Array.from(ints, (v) => 0x3c00 + v + 3); // raw half bits
    case 'FP32':
      return Float32Array.from(ints, (v) => v / 3);
    case 'FP64':
      return Float64Array.from(ints, (v) => v / 3);
    case 'BYTES':
      return ints.map((v) => `s${v}\u00e9`);
  }
}

describe('simpleAddSub', () => {
  it('computes INPUT0+INPUT1 and INPUT0-INPUT1', async () => {
    const s = await session(simpleAddSub());
    const a = Int32Array.from({ length: 48 }, (_, i) => i);
    const b = Int32Array.from({ length: 48 }, (_, i) => 1000 - 3 * i);
    const r = await s.run({ INPUT0: new ort.Tensor('int32', a, [3, 16]), INPUT1: new ort.Tensor('int32', b, [3, 16]) });
    expect(r.OUTPUT0.dims).toEqual([3, 16]);
    expect(Array.from(r.OUTPUT0.data as Int32Array)).toEqual(Array.from(a, (v, i) => v + b[i]));
    expect(Array.from(r.OUTPUT1.data as Int32Array)).toEqual(Array.from(a, (v, i) => v - b[i]));
  });
});

describe('identity', () => {
  it.each(TENSOR_DATATYPES)('returns its input for %s', async (dt) => {
    const s = await session(identity(dt, [3]));
    expect(s.inputNames).toEqual(['INPUT0']);
    expect(s.outputNames).toEqual(['OUTPUT0']);
    const data = sampleData(dt, 6);
    const r = await s.run({ INPUT0: new ort.Tensor(ORT_TYPES[dt], data, [2, 3]) });
    expect(r.OUTPUT0.type).toBe(ORT_TYPES[dt]);
    expect(r.OUTPUT0.dims).toEqual([2, 3]);
    expect(Array.from(r.OUTPUT0.data)).toEqual(Array.from(data as ArrayLike<unknown>));
  });

  it('accepts variable dims, STRING as BYTES, and custom names', async () => {
    const s = await session(identity('STRING', [-1], { inputName: 'TEXT', outputName: 'ECHO' }));
    const r = await s.run({ TEXT: new ort.Tensor('string', ['a', 'bc', 'd', ''], [2, 2]) });
    expect(r.ECHO.dims).toEqual([2, 2]);
    expect(Array.from(r.ECHO.data)).toEqual(['a', 'bc', 'd', '']);
  });
});

describe('fixedBatchModel', () => {
  it('has fixed dims [2,4] and no batch dim', async () => {
    const m = fixedBatchModel();
    const decoded = parseModel(serializeModel(m));
    const dims = decoded.graph!.input![0].type!.tensorType!.shape!.dim!.map((d) => [Number(d.dimValue), Boolean(d.dimParam)]);
    expect(dims).toEqual([
      [2, false],
      [4, false],
    ]);
    const s = await session(m);
    const r = await s.run({ INPUT0: f32([2, 4]) });
    expect(r.OUTPUT0.dims).toEqual([2, 4]);
    await expect(s.run({ INPUT0: f32([3, 4]) })).rejects.toThrow();
  });
});

describe('mlp', () => {
  it('maps [batch,inputSize] to [batch,width]', async () => {
    const s = await session(mlp({ layers: 3, width: 32, inputSize: 8 }));
    const r = await s.run({ INPUT0: f32([5, 8]) });
    expect(r.OUTPUT0.dims).toEqual([5, 32]);
    const out = Array.from(r.OUTPUT0.data as Float32Array);
    expect(out.every((v) => Number.isFinite(v) && v >= 0)).toBe(true);
    expect(out.some((v) => v > 0)).toBe(true);
  });

  it('is deterministic: same seed same bytes, other seed other bytes', () => {
    const a = serializeModel(mlp({ layers: 2, width: 64, seed: 7 }));
    const b = serializeModel(mlp({ layers: 2, width: 64, seed: 7 }));
    const c = serializeModel(mlp({ layers: 2, width: 64, seed: 8 }));
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true);
    expect(Buffer.from(a).equals(Buffer.from(c))).toBe(false);
  });

  it('builds the 4x2048 variant at about 67 MB and runs it', async () => {
    const bytes = serializeModel(mlp({ layers: 4, width: 2048 }));
    expect(bytes.byteLength).toBeGreaterThan(67_000_000);
    expect(bytes.byteLength).toBeLessThan(67_300_000);
    const s = await ort.InferenceSession.create(bytes);
    const r = await s.run({ INPUT0: f32([2, 2048]) });
    expect(r.OUTPUT0.dims).toEqual([2, 2048]);
    await s.release();
  });

  it('rejects bad sizes', () => {
    expect(() => mlp({ layers: 0, width: 8 })).toThrow(/layers/);
    expect(() => mlp({ layers: 1, width: 1.5 })).toThrow(/width/);
  });
});

describe('convNet', () => {
  it('maps [batch,3,32,32] to [batch,10], the same for each identical image', async () => {
    const s = await session(convNet());
    const r = await s.run({ INPUT0: f32([4, 3, 32, 32], (i) => Math.sin(i % 3072)) });
    expect(r.OUTPUT0.dims).toEqual([4, 10]);
    const out = Array.from(r.OUTPUT0.data as Float32Array);
    expect(out.every(Number.isFinite)).toBe(true);
    expect(out.slice(30, 40)).toEqual(out.slice(0, 10));
  });

  it('honours classes', async () => {
    const s = await session(convNet({ classes: 3 }));
    expect((await s.run({ INPUT0: f32([1, 3, 32, 32]) })).OUTPUT0.dims).toEqual([1, 3]);
  });
});

describe('slowModel', () => {
  it('applies tanh(x W) repeats times', async () => {
    const width = 8;
    const repeats = 3;
    const m = slowModel({ repeats, width });
    const raw = parseModel(serializeModel(m)).graph!.initializer!.find((t) => t.name === 'w')!.rawData!;
    const w = new Float32Array(new Uint8Array(raw).buffer); // copy: decoded bytes are a view on a pool
    const x0 = Float32Array.from({ length: 2 * width }, (_, i) => Math.cos(i));
    let x = Array.from(x0);
    for (let r = 0; r < repeats; r++) {
      x = x.map((_, idx) => {
        const row = Math.floor(idx / width);
        const col = idx % width;
        let sum = 0;
        for (let k = 0; k < width; k++) sum += x[row * width + k] * w[k * width + col];
        return Math.tanh(sum);
      });
    }
    const s = await session(m);
    const r = await s.run({ INPUT0: new ort.Tensor('float32', x0, [2, width]) });
    expect(r.OUTPUT0.dims).toEqual([2, width]);
    Array.from(r.OUTPUT0.data as Float32Array).forEach((v, i) => expect(v).toBeCloseTo(x[i], 4));
  });

  it('stays small however many repeats', () => {
    const a = serializeModel(slowModel({ repeats: 10, width: 64 })).byteLength;
    const b = serializeModel(slowModel({ repeats: 100_000, width: 64 })).byteLength;
    expect(Math.abs(a - b)).toBeLessThan(16);
  });
});
