import {
  Errors,
  inputSharedMemoryRefOf,
  sharedMemoryRefOf,
  type InferenceRequest,
  type RequestedOutput,
  type RequestInput,
} from '../core/index.ts';
import { validateShape, type Dimension } from '../tensor/byte-size.ts';
import { isDataType, type DataType } from '../tensor/datatype.ts';
import { elementCount, formatShape } from '../tensor/shape.ts';
import type { Parameters } from '../tensor/tensor.ts';
import { fromInferParameters, sequenceIdOf } from './parameters.ts';
import { CONTENTS_FIELD_OF, contentsToRaw, hasContents } from './tensor-contents.ts';
import type { InferInputTensorWire, ModelInferRequestWire, WireLong } from './wire-types.ts';

/**
 * ModelInferRequest -> InferenceRequest. Raw inputs stay views on the received message;
 * typed contents are converted to raw bytes once. Checks against the model are core's job.
 */
export function decodeInferRequest(msg: ModelInferRequestWire): InferenceRequest {
  const raw = msg.raw_input_contents ?? [];
  // Inputs in shared memory take no raw_input_contents entry (as Triton's clients send them).
  const parameters = msg.inputs.map((input) => fromInferParameters(input.parameters, `input '${input.name}'`));
  const carried = parameters.filter((p) => !('shared_memory_region' in p)).length;
  if (raw.length > 0 && raw.length !== carried) {
    throw Errors.invalidArg(
      `raw_input_contents has ${raw.length} entries but the request has ${carried} inputs not in shared memory; when used, it must hold one entry per such input, in the order of inputs`,
    );
  }
  let next = 0;
  const inputs = msg.inputs.map((input, i) => decodeInput(input, parameters[i]!, () => (raw.length > 0 ? raw[next++] : undefined)));
  const outputs: RequestedOutput[] = (msg.outputs ?? []).map((o) => {
    const outputParameters = fromInferParameters(o.parameters, `output '${o.name}'`);
    const sharedMemory = sharedMemoryRefOf(outputParameters, `output '${o.name}'`);
    return { name: o.name, parameters: outputParameters, ...(sharedMemory && { sharedMemory }) };
  });
  return {
    ...(msg.id !== '' && { id: msg.id }),
    modelName: msg.model_name,
    modelVersion: msg.model_version,
    inputs,
    outputs,
    parameters: fromInferParameters(msg.parameters, 'the request'),
    ...sequenceIdOf(msg.parameters),
  };
}

function decodeInput(input: InferInputTensorWire, parameters: Parameters, nextRaw: () => Uint8Array | undefined): RequestInput {
  const { name, datatype } = input;
  if (!isDataType(datatype)) {
    throw Errors.invalidArg(`input '${name}' has invalid datatype '${datatype}'`);
  }
  const shape = shapeOf(input.shape, name, datatype);
  const sharedMemory = inputSharedMemoryRefOf(name, datatype, shape, parameters);
  if (sharedMemory) {
    if (hasContents(input.contents)) {
      throw Errors.invalidArg(`input '${name}' is in shared memory region '${sharedMemory.region}' and must not also have contents`);
    }
    return { name, datatype, shape, data: new Uint8Array(0), sharedMemory };
  }
  const raw = nextRaw();
  let data: Uint8Array;
  if (raw !== undefined) {
    if (hasContents(input.contents)) {
      throw Errors.invalidArg(
        `input '${name}' has contents while raw_input_contents is used; raw_input_contents must then carry every input`,
      );
    }
    data = raw;
  } else if (hasContents(input.contents)) {
    data = contentsToRaw(name, datatype, input.contents!);
  } else if (elementCount(shape) > 0) {
    const field = CONTENTS_FIELD_OF[datatype];
    throw Errors.invalidArg(`input '${name}' has no data: send it in raw_input_contents` + (field ? ` or in contents.${field}` : ''));
  } else {
    data = new Uint8Array(0);
  }
  return { name, datatype, shape, data };
}

/**
 * An int64 shape as the wire carries it (text, exact): a negative dimension is refused in core
 * Triton's words, and the rest checked as over HTTP (validateShape).
 */
function shapeOf(wire: readonly WireLong[], input: string, datatype: DataType): number[] {
  const dims = wire.map((d): Dimension => (Number.isSafeInteger(Number(d)) ? Number(d) : BigInt(d)));
  if (dims.some((d) => d < 0)) throw Errors.invalidDimension(input, formatShape(dims));
  return validateShape(dims, input, datatype);
}
