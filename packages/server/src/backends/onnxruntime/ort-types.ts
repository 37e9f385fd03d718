import type { DataType } from '../../tensor/datatype.ts';

/** onnxruntime-node tensor type names by wire datatype (BF16 has no JS tensor type). */
export const ORT_TYPE_OF: Readonly<Record<DataType, string | undefined>> = {
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BF16: undefined,
  BYTES: 'string',
};

const DATATYPE_OF_ORT: Readonly<Record<string, DataType>> = Object.fromEntries(
  Object.entries(ORT_TYPE_OF)
    .filter(([, ort]) => ort !== undefined)
    .map(([dt, ort]) => [ort, dt]),
) as Record<string, DataType>;

export function datatypeOfOrtType(ortType: string): DataType | undefined {
  return DATATYPE_OF_ORT[ortType];
}
