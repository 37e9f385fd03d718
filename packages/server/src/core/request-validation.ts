import { checkedElementCount, expectedByteSize } from '../tensor/byte-size.ts';
import { countBytesElements, firstNonTextElement } from '../tensor/bytes-codec.ts';
import { elementCount, formatShape } from '../tensor/shape.ts';
import { reshapedShape } from '../tensor/reshape.ts';
import type { ParameterValue, Tensor } from '../tensor/tensor.ts';
import { classificationCount } from './classification.ts';
import { Errors } from '../errors/errors.ts';
import { isEnsembleConfig } from '../config/ensemble.ts';
import type { LoadedVersion } from '../models/loaded-version.ts';
import { rawRequestInput } from './raw-input.ts';
import type { InferenceRequest } from '../protocol/types.ts';

/** Backends whose models get BYTES elements as bytes, any bytes: the code of a JavaScript or Python model. */
const BYTES_AS_BYTES: ReadonlySet<string> = new Set(['js', 'python']);

export interface ValidatedRequest {
  /** One tensor per model input, in config order, shaped as the model receives it. */
  readonly inputs: Tensor[];
  readonly batchSize: number;
  /** Outputs to return, in the order asked; all config outputs when none were asked. */
  readonly outputNames: string[];
  /** Outputs asked for as classifications, with the number of classes to return. */
  readonly classifications: ReadonlyMap<string, number>;
  readonly priority: number;
  readonly timeoutMicroseconds: number;
}

/**
 * Checks a request against the model's config, once, for both protocols: names, datatypes,
 * shapes, batch size, byte sizes, requested outputs and scheduling parameters. A raw binary
 * request's one input is deduced from the config first.
 */
export function validateRequest(request: InferenceRequest, model: LoadedVersion): ValidatedRequest {
  const name = model.modelName;
  const given = request.rawInput === undefined ? request.inputs : [rawRequestInput(request.rawInput, model)];
  // Most models take one input or a few: a Map only for many (the common path allocates none).
  const byName = given.length > SMALL_INPUT_COUNT ? new Map<string, Tensor>() : undefined;
  for (let i = 0; i < given.length; i++) {
    const input = given[i]!;
    if (byName ? byName.has(input.name) : indexOfInput(given, input.name) < i) {
      throw Errors.invalidArg(`input '${input.name}' already exists in request for model '${name}'`);
    }
    if (!model.inputsByName.has(input.name)) {
      throw Errors.invalidArg(`unexpected inference input '${input.name}' for model '${name}'`);
    }
    byName?.set(input.name, input);
  }
  const inputNamed = (inputName: string): Tensor | undefined => (byName ? byName.get(inputName) : given[indexOfInput(given, inputName)]);
  if (model.inputs.some((spec) => !spec.optional && !inputNamed(spec.name))) {
    const missing = model.inputs.filter((spec) => !spec.optional && !inputNamed(spec.name)).map((s) => `'${s.name}'`);
    throw Errors.invalidArg(
      `expected ${model.inputs.length} inputs but got ${given.length} inputs for model '${name}'; missing ${missing.join(', ')}`,
    );
  }

  const batching = model.maxBatchSize > 0;
  let batchSize: number | undefined;
  const inputs: Tensor[] = [];
  for (const spec of model.inputs) {
    const tensor = inputNamed(spec.name);
    if (!tensor) continue;
    if (tensor.datatype !== spec.datatype) {
      throw Errors.invalidArg(
        `inference input '${spec.name}' data-type is '${tensor.datatype}', but model '${name}' expects '${spec.datatype}'`,
      );
    }
    if (!shapeMatches(tensor.shape, spec.dims, batching)) {
      const expected = batching ? [-1, ...spec.dims] : spec.dims;
      throw Errors.invalidArg(
        `unexpected shape for input '${spec.name}' for model '${name}'. Expected ${formatShape(expected)}, got ${formatShape(tensor.shape)}`,
      );
    }
    if (batching) {
      const b = tensor.shape[0]!;
      if (b < 1) {
        throw Errors.invalidArg(`inference request batch-size must be >= 1 for '${name}', got ${b} for input '${spec.name}'`);
      }
      if (b > model.maxBatchSize) {
        throw Errors.invalidArg(
          `inference request batch-size must be <= ${model.maxBatchSize} for '${name}', got ${b} for input '${spec.name}'`,
        );
      }
      if (batchSize !== undefined && b !== batchSize) {
        throw Errors.invalidArg(
          `inputs of a request to model '${name}' disagree on the batch size (${batchSize} and ${b} for input '${spec.name}')`,
        );
      }
      batchSize = b;
    }
    // ONNX Runtime string tensors hold text; a JavaScript or Python model gets BYTES as bytes (images,
    // say), and an ensemble passes them on to its steps, which check them for their own backend.
    checkByteSize(tensor, name, !BYTES_AS_BYTES.has(model.config.backend ?? '') && !isEnsembleConfig(model.config));
    const shape = reshapedShape(tensor.shape, spec.dims, spec.modelDims, batching);
    if (spec.modelDims && elementCount(shape) !== elementCount(tensor.shape)) {
      throw Errors.invalidArg(
        `input '${spec.name}' of model '${name}' cannot be reshaped from ${formatShape(tensor.shape)} to ${formatShape(shape)}`,
      );
    }
    inputs.push(shape === tensor.shape ? tensor : { ...tensor, shape });
  }

  const outputNames = requestedOutputs(request, model);
  const classifications = request.outputs?.some((o) => o.parameters['classification'] !== undefined)
    ? new Map<string, number>()
    : NO_CLASSIFICATIONS;
  for (const output of classifications === NO_CLASSIFICATIONS ? [] : request.outputs!) {
    const count = output.parameters['classification'];
    if (count === undefined) continue;
    // A classification is BYTES text, not the output's tensor: it has no place in the region.
    if (output.sharedMemory) {
      throw Errors.invalidArg(`output '${output.name}': Output can't set both 'shared_memory_region' and 'classification'`);
    }
    const spec = model.outputsByName.get(output.name)!;
    if (spec.datatype === 'BYTES' || spec.datatype === 'BOOL') {
      throw Errors.invalidArg(
        `classification of output '${output.name}' of model '${name}' needs numeric scores, but it is ${spec.datatype}`,
      );
    }
    (classifications as Map<string, number>).set(output.name, classificationCount(count, output.name));
  }
  return {
    inputs,
    batchSize: batchSize ?? 1,
    outputNames,
    classifications,
    priority: nonNegativeInteger(request.parameters['priority'], 'priority', name),
    timeoutMicroseconds: nonNegativeInteger(request.parameters['timeout'], 'timeout', name),
  };
}

const SMALL_INPUT_COUNT = 8;

const NO_CLASSIFICATIONS: ReadonlyMap<string, number> = new Map();

function indexOfInput(inputs: readonly Tensor[], name: string): number {
  for (let i = 0; i < inputs.length; i++) if (inputs[i]!.name === name) return i;
  return -1;
}

/** Whether `shape` is `dims` (-1: any), after a batch dimension of any size when `batched`. */
function shapeMatches(shape: readonly number[], dims: readonly number[], batched: boolean): boolean {
  const offset = batched ? 1 : 0;
  if (shape.length !== dims.length + offset) return false;
  for (let i = 0; i < dims.length; i++) if (dims[i] !== -1 && dims[i] !== shape[i + offset]) return false;
  return true;
}

/** Every output of the model, in config order: one shared array per loaded version (nobody changes it). */
const allOutputNames = new WeakMap<LoadedVersion, string[]>();

function checkByteSize(tensor: Tensor, model: string, textOnly: boolean): void {
  // Past 2^31 elements, or bytes, in Triton's words (the frontends only read the shape).
  const count = checkedElementCount(tensor.shape, tensor.name);
  if (tensor.datatype === 'BYTES') {
    if (textOnly) checkText(tensor, model);
    const found = countBytesElements(tensor.data, tensor.name);
    if (found !== count) {
      throw Errors.invalidArg(
        `input '${tensor.name}' of model '${model}' has ${found} BYTES elements, but its shape ${formatShape(tensor.shape)} needs ${count}`,
      );
    }
    return;
  }
  const expected = expectedByteSize(tensor.datatype, tensor.shape, tensor.name);
  if (tensor.data.byteLength !== expected) {
    const detail = `shape ${formatShape(tensor.shape)} of ${tensor.datatype} takes ${expected} bytes`;
    throw Errors.inputByteSizeMismatch(tensor.name, model, expected, tensor.data.byteLength, detail);
  }
}

/** ONNX Runtime string tensors hold text: bytes that would not survive unchanged are refused here, before batching. */
function checkText(tensor: Tensor, model: string): void {
  const i = firstNonTextElement(tensor.data, tensor.name);
  if (i >= 0) {
    throw Errors.invalidArg(
      `element ${i} of BYTES input '${tensor.name}' of model '${model}' is not NUL-free UTF-8 text, which ONNX Runtime string tensors require`,
    );
  }
}

function requestedOutputs(request: InferenceRequest, model: LoadedVersion): string[] {
  if (!request.outputs || request.outputs.length === 0) {
    let names = allOutputNames.get(model);
    if (!names) allOutputNames.set(model, (names = model.outputs.map((o) => o.name)));
    return names;
  }
  const seen = new Set<string>();
  for (const output of request.outputs) {
    if (!model.outputsByName.has(output.name)) {
      throw Errors.invalidArg(`unexpected inference output '${output.name}' for model '${model.modelName}'`);
    }
    if (seen.has(output.name)) {
      throw Errors.invalidArg(`output '${output.name}' already exists in request for model '${model.modelName}'`);
    }
    seen.add(output.name);
  }
  return [...seen];
}

function nonNegativeInteger(value: ParameterValue | undefined, key: string, model: string): number {
  if (value === undefined) return 0;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw Errors.invalidArg(`request parameter '${key}' for model '${model}' must be a non-negative integer, got ${JSON.stringify(value)}`);
  }
  return value;
}
