import type { DataType } from '../tensor/datatype.ts';

/**
 * What a model file itself declares about a tensor (read from the ONNX graph): name,
 * wire datatype, and dims including the batch dimension, -1 where a dim is symbolic.
 */
export interface ModelTensorInfo {
  readonly name: string;
  readonly datatype: DataType;
  readonly dims: readonly number[];
  /** A graph input with an initializer: the model runs without it (not for outputs). */
  readonly optional?: boolean;
}

export interface ModelIO {
  readonly inputs: readonly ModelTensorInfo[];
  readonly outputs: readonly ModelTensorInfo[];
}
