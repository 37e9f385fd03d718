import { ELEMENT_BYTE_SIZE } from '../tensor/datatype.ts';
import { formatShape } from '../tensor/shape.ts';
import { Errors } from '../errors/errors.ts';
import type { LoadedVersion } from '../models/loaded-version.ts';
import type { RequestInput } from '../protocol/types.ts';

/**
 * The input of a raw binary request (HTTP `Inference-Header-Content-Length: 0`, the body the
 * bytes of the model's only input), as Triton's InferenceRequest::Normalize deduces it: name and
 * datatype from the config; the shape from the config dims, with a batch dimension of 1 for a
 * batching model, and the one variable dimension, if any, from the byte size. A BYTES input must
 * hold one element ([1]); the body is that element, its length prefix added here. Triton's words
 * for each refusal.
 */
export function rawRequestInput(body: Uint8Array, model: LoadedVersion): RequestInput {
  if (model.inputs.length !== 1) {
    throw Errors.invalidArg(
      `Raw request must only have 1 input (found 1) to be deduced but got ${model.inputs.length} inputs in '${model.modelName}' model configuration`,
    );
  }
  const spec = model.inputs[0]!;
  const shape = model.maxBatchSize > 0 ? [1] : [];
  let variableAxis = -1;
  let fixedElements = 1;
  for (const dim of spec.dims) {
    if (dim === -1) {
      if (variableAxis !== -1) {
        throw Errors.invalidArg(
          `The shape of the raw input '${spec.name}' can not be deduced because there are more than one variable-sized dimension`,
        );
      }
      variableAxis = shape.length;
    } else {
      fixedElements *= dim;
    }
    shape.push(dim);
  }
  if (spec.datatype === 'BYTES') {
    if (variableAxis !== -1 || fixedElements !== 1) {
      throw Errors.invalidArg(`For BYTE datatype raw input '${spec.name}', the model must have input shape [1]`);
    }
    const data = new Uint8Array(4 + body.byteLength);
    new DataView(data.buffer).setUint32(0, body.byteLength, true);
    data.set(body, 4);
    return { name: spec.name, datatype: spec.datatype, shape, data };
  }
  if (variableAxis !== -1) {
    const rowBytes = fixedElements * ELEMENT_BYTE_SIZE[spec.datatype];
    const rows = rowBytes === 0 ? 0 : Math.floor(body.byteLength / rowBytes);
    shape[variableAxis] = rows;
    if (rows * rowBytes !== body.byteLength) {
      throw Errors.inputByteSizeMismatch(
        spec.name,
        model.modelName,
        rows * rowBytes,
        body.byteLength,
        `a raw request body of ${body.byteLength} bytes is not a whole number of ${rowBytes}-byte steps of the variable dimension of ${formatShape(spec.dims)} ${spec.datatype}`,
      );
    }
  }
  return { name: spec.name, datatype: spec.datatype, shape, data: body };
}
