/**
 * Test-only access to onnxruntime-node, which modelgen does not depend on: it is loaded from
 * the server package's location. Only the few types the tests use are declared here.
 */
import { createRequire } from 'node:module';

export type OrtData = ArrayLike<unknown> & { readonly length: number };

export interface OrtTensor {
  readonly type: string;
  readonly dims: readonly number[];
  readonly data: OrtData;
}

export interface OrtSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
  release(): Promise<void>;
}

export interface Ort {
  Tensor: new (type: string, data: unknown, dims: readonly number[]) => OrtTensor;
  InferenceSession: { create(model: Uint8Array, options?: object): Promise<OrtSession> };
}

export function loadOrt(): Ort {
  const require = createRequire(new URL('../../server/package.json', import.meta.url));
  return require('onnxruntime-node') as Ort;
}

/** onnxruntime-node tensor type names by KServe datatype. */
export const ORT_TYPES: Record<string, string> = {
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
  BYTES: 'string',
};
