/** KServe v2 datatype strings, as they travel on the wire. */
export const DATATYPES = [
  'BOOL',
  'UINT8',
  'UINT16',
  'UINT32',
  'UINT64',
  'INT8',
  'INT16',
  'INT32',
  'INT64',
  'FP16',
  'FP32',
  'FP64',
  'BF16',
  'BYTES',
] as const;
export type DataType = (typeof DATATYPES)[number];

const DATATYPE_SET: ReadonlySet<string> = new Set(DATATYPES);
export function isDataType(value: unknown): value is DataType {
  return typeof value === 'string' && DATATYPE_SET.has(value);
}

/** Bytes per element; 0 for BYTES, whose elements have variable length. */
export const ELEMENT_BYTE_SIZE: Readonly<Record<DataType, number>> = {
  BOOL: 1,
  UINT8: 1,
  UINT16: 2,
  UINT32: 4,
  UINT64: 8,
  INT8: 1,
  INT16: 2,
  INT32: 4,
  INT64: 8,
  FP16: 2,
  FP32: 4,
  FP64: 8,
  BF16: 2,
  BYTES: 0,
};

/** config.pbtxt `data_type` enum names (model_config.proto DataType) <-> wire datatype. */
export const CONFIG_TYPE_TO_DATATYPE: Readonly<Record<string, DataType>> = {
  TYPE_BOOL: 'BOOL',
  TYPE_UINT8: 'UINT8',
  TYPE_UINT16: 'UINT16',
  TYPE_UINT32: 'UINT32',
  TYPE_UINT64: 'UINT64',
  TYPE_INT8: 'INT8',
  TYPE_INT16: 'INT16',
  TYPE_INT32: 'INT32',
  TYPE_INT64: 'INT64',
  TYPE_FP16: 'FP16',
  TYPE_FP32: 'FP32',
  TYPE_FP64: 'FP64',
  TYPE_STRING: 'BYTES',
  TYPE_BF16: 'BF16',
};
export const DATATYPE_TO_CONFIG_TYPE: Readonly<Record<DataType, string>> = Object.fromEntries(
  Object.entries(CONFIG_TYPE_TO_DATATYPE).map(([k, v]) => [v, k]),
) as Record<DataType, string>;

export type NumericArray =
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | BigUint64Array
  | Int8Array
  | Int16Array
  | Int32Array
  | BigInt64Array
  | Float32Array
  | Float64Array;

export type TypedArrayConstructor = {
  new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): NumericArray;
  new (length: number): NumericArray;
  readonly BYTES_PER_ELEMENT: number;
};

/**
 * The typed array that holds a datatype's elements. FP16 and BF16 have no JS array type:
 * they are carried as their raw 16-bit patterns (Uint16Array).
 */
export const TYPED_ARRAY_OF: Readonly<Record<Exclude<DataType, 'BYTES'>, TypedArrayConstructor>> = {
  BOOL: Uint8Array,
  UINT8: Uint8Array,
  UINT16: Uint16Array,
  UINT32: Uint32Array,
  UINT64: BigUint64Array,
  INT8: Int8Array,
  INT16: Int16Array,
  INT32: Int32Array,
  INT64: BigInt64Array,
  FP16: Uint16Array,
  BF16: Uint16Array,
  FP32: Float32Array,
  FP64: Float64Array,
} as Record<Exclude<DataType, 'BYTES'>, TypedArrayConstructor>;
