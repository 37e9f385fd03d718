import { Errors, type InferenceRequest, type InferenceResponse, type RequestedOutput } from '../core/index.ts';
import { isDataType } from '../tensor/datatype.ts';
import { elementCount } from '../tensor/shape.ts';
import type { Parameters, Tensor } from '../tensor/tensor.ts';
import { fromInferParameters, toInferParameters } from './parameters.ts';
import { CONTENTS_FIELD_OF, contentsToRaw, hasContents } from './tensor-contents.ts';
import type { InferInputTensorWire, ModelInferRequestWire, ModelInferResponseWire, WireLong } from './wire-types.ts';

export const SHARED_MEMORY_UNSUPPORTED = 'shared memory is not supported by Batchwise';

/**
 * ModelInferRequest -> InferenceRequest. Raw inputs stay views on the received message;
 * typed contents are converted to raw bytes once. Checks against the model are core's job.
 */
export function decodeInferRequest(msg: ModelInferRequestWire): InferenceRequest {
  const raw = msg.raw_input_contents ?? [];
  if (raw.length > 0 && raw.length !== msg.inputs.length) {
    throw Errors.invalidArg(
      `raw_input_contents has ${raw.length} entries but the request has ${msg.inputs.length} inputs; when used, it must hold one entry per input, in the order of inputs`,
    );
  }
  const inputs = msg.inputs.map((input, i) => decodeInput(input, raw.length > 0 ? raw[i] : undefined));
  const outputs: RequestedOutput[] = (msg.outputs ?? []).map((o) => ({
    name: o.name,
    parameters: withoutSharedMemory(fromInferParameters(o.parameters, `output '${o.name}'`)),
  }));
  return {
    ...(msg.id !== '' && { id: msg.id }),
    modelName: msg.model_name,
    ...(msg.model_version !== '' && { modelVersion: msg.model_version }),
    inputs,
    outputs,
    parameters: fromInferParameters(msg.parameters, 'the request'),
  };
}

function decodeInput(input: InferInputTensorWire, raw: Uint8Array | undefined): Tensor {
  const { name, datatype } = input;
  if (!isDataType(datatype)) {
    throw Errors.invalidArg(`input '${name}' has invalid datatype '${datatype}'`);
  }
  withoutSharedMemory(fromInferParameters(input.parameters, `input '${name}'`));
  const shape = input.shape.map((d) => toDim(d, name));
  let data: Uint8Array;
  if (raw !== undefined) {
    if (hasContents(input.contents)) {
      throw Errors.invalidArg(`input '${name}' has contents while raw_input_contents is used; raw_input_contents must then carry every input`);
    }
    data = raw;
  } else if (hasContents(input.contents)) {
    data = contentsToRaw(name, datatype, input.contents!);
  } else if (elementCount(shape) > 0) {
    const field = CONTENTS_FIELD_OF[datatype];
    throw Errors.invalidArg(
      `input '${name}' has no data: send it in raw_input_contents` + (field ? ` or in contents.${field}` : ''),
    );
  } else {
    data = new Uint8Array(0);
  }
  return { name, datatype, shape, data };
}

function toDim(value: WireLong, input: string): number {
  const d = Number(value);
  if (!Number.isSafeInteger(d) || d < 0) {
    throw Errors.invalidArg(`shape of input '${input}' has an invalid dimension ${value}`);
  }
  return d;
}

function withoutSharedMemory(parameters: Parameters): Parameters {
  if ('shared_memory_region' in parameters) throw Errors.unsupported(SHARED_MEMORY_UNSUPPORTED);
  return parameters;
}

/** InferenceResponse -> ModelInferResponse; outputs always travel in raw_output_contents. */
export function encodeInferResponse(response: InferenceResponse): ModelInferResponseWire {
  return {
    model_name: response.modelName,
    model_version: response.modelVersion,
    id: response.id ?? '',
    parameters: toInferParameters(response.parameters),
    outputs: response.outputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: [...t.shape] })),
    raw_output_contents: response.outputs.map((t) => t.data),
  };
}
