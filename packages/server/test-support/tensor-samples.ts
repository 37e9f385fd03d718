import { serializeBytesElements } from '../src/tensor/bytes-codec.ts';
import { DATATYPES, TYPED_ARRAY_OF, type DataType } from '../src/tensor/datatype.ts';

/** Test data: one [2, 3] tensor per datatype, with its raw bytes and (where JSON can carry it) JSON values. */
export interface Sample {
  readonly datatype: DataType;
  readonly shape: number[];
  readonly bytes: Uint8Array;
  /** Absent for FP16 and BF16, which travel binary only. */
  readonly json?: unknown[];
}

const SHAPE = [2, 3];
const JSON_VALUES: Record<Exclude<DataType, 'FP16' | 'BF16'>, unknown[]> = {
  BOOL: [true, false, false, true, true, false],
  UINT8: [0, 1, 127, 128, 254, 255],
  INT8: [-128, -1, 0, 1, 100, 127],
  UINT16: [0, 1, 256, 32768, 65534, 65535],
  INT16: [-32768, -1, 0, 1, 300, 32767],
  UINT32: [0, 1, 65536, 2147483648, 4294967294, 4294967295],
  INT32: [-2147483648, -1, 0, 1, 70000, 2147483647],
  UINT64: [0, 1, 2 ** 32, 2 ** 40 + 3, Number.MAX_SAFE_INTEGER - 1, Number.MAX_SAFE_INTEGER],
  INT64: [Number.MIN_SAFE_INTEGER, -(2 ** 40), -1, 0, 2 ** 33 + 1, Number.MAX_SAFE_INTEGER],
  FP32: [-1.5, 0, 0.25, 3.4028234663852886e38, 1.401298464324817e-45, 1024.75],
  FP64: [-1.5, 0, 0.1, Number.MAX_VALUE, Number.MIN_VALUE, -123456.789],
  BYTES: ['', 'hello', 'wörld', '日本語', '🙂 emoji', ''],
};

function toBytes(datatype: DataType, values: unknown[]): Uint8Array {
  if (datatype === 'BYTES') return serializeBytesElements(values as string[]);
  if (datatype === 'BOOL') return Uint8Array.from(values as boolean[], (b) => (b ? 1 : 0));
  if (datatype === 'INT64' || datatype === 'UINT64') {
    const a = new TYPED_ARRAY_OF[datatype](values.length) as BigInt64Array;
    values.forEach((v, i) => (a[i] = BigInt(v as number)));
    return new Uint8Array(a.buffer);
  }
  const a = new TYPED_ARRAY_OF[datatype as 'FP32'](values.length) as Float32Array;
  a.set(values as number[]);
  return new Uint8Array(a.buffer);
}

export const SAMPLES: readonly Sample[] = DATATYPES.map((datatype): Sample => {
  if (datatype === 'FP16' || datatype === 'BF16') {
    // Raw 16-bit patterns: 1.0, -2.0, 0, +inf, a NaN, the smallest subnormal.
    const patterns = datatype === 'FP16' ? [0x3c00, 0xc000, 0, 0x7c00, 0x7e00, 1] : [0x3f80, 0xc000, 0, 0x7f80, 0x7fc0, 1];
    return { datatype, shape: SHAPE, bytes: new Uint8Array(Uint16Array.from(patterns).buffer) };
  }
  const json = JSON_VALUES[datatype];
  return { datatype, shape: SHAPE, bytes: toBytes(datatype, json), json };
});

/** A copy of `bytes` placed at an odd offset of a larger buffer, so typed views cannot alias it. */
export function unaligned(bytes: Uint8Array): Uint8Array {
  const backing = new Uint8Array(bytes.byteLength + 3);
  backing.set(bytes, 1);
  return backing.subarray(1, 1 + bytes.byteLength);
}
