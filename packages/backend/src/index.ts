/**
 * @batchwise/backend: what model code of the JavaScript backend (`backend: "js"`) imports:
 * the types of the model API, `tensor` to build outputs, `ModelError` for one request's error,
 * and `inferModel` / `inferModelStream` to call other models of the server (BLS). The server resolves this package
 * to its own copy for every model, wherever the model's folder is. README.md has an example.
 */
export type {
  DataType,
  InferModelRequest,
  InferModelResult,
  InitializeArgs,
  JsModel,
  ModelRequest,
  ModelResponse,
  ResponseSender,
  Tensor,
  TensorData,
} from './types.ts';
export { ModelCallError, ModelError, ResponseSenderError, isErrorCode, type ErrorCode } from './errors.ts';
export { ARRAY_OF, elementCount, halfBits, tensor } from './tensor.ts';
export {
  inferModel,
  inferModelStream,
  MODEL_CALLER,
  MODEL_STREAM_CALLER,
  type ModelCaller,
  type ModelStreamCaller,
} from './infer-model.ts';
