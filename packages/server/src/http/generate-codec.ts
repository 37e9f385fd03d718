/**
 * Triton's generate extension (docs/protocol/extension_generate.md; server http_server.cc
 * GenerateRequestClass): a flat JSON object in, a flat JSON object out. A request key that names a
 * model input becomes that tensor (a scalar or a 1-D array, shaped from the model's metadata),
 * `id` the request id, `parameters` request parameters, and any other key a request parameter. A
 * response has `model_name`, `model_version`, `id` (when the request had one), its parameters and
 * one key per output: the element itself when the output holds one, else the flat array.
 */
import { Errors, type InferenceRequest, type InferenceResponse, type ModelMetadata } from '../core/index.ts';
import type { DataType } from '../tensor/datatype.ts';
import { describeValue } from '../tensor/describe-value.ts';
import { decodeJsonTensorData, encodeJsonTensorData } from '../tensor/json-codec.ts';
import { parseRequestJson } from '../tensor/json-text.ts';
import type { Parameters } from '../tensor/tensor.ts';
import { parseJsonObject } from './infer-codec.ts';

/** The keys of a generate request that are neither tensors nor parameters. */
const ID = 'id';
const PARAMETERS = 'parameters';

/** A generate request body as an InferenceRequest for `model`, whose metadata names its inputs. */
export function decodeGenerateRequest(body: Buffer, metadata: ModelMetadata, model: string, version: string | undefined): InferenceRequest {
  const json = parseJsonObject(body, { parse: parseRequestJson });
  const inputs = new Map(metadata.inputs.map((i) => [i.name, i]));
  const request: { id?: string; inputs: InferenceRequest['inputs']; parameters: Parameters } = { inputs: [], parameters: {} };
  for (const [key, value] of Object.entries(json)) {
    const input = inputs.get(key);
    if (input) {
      request.inputs.push(tensorOf(key, input.datatype as DataType, input.shape, value));
    } else if (key === ID) {
      if (typeof value !== 'string')
        throw Errors.invalidArg(`Unable to parse 'id': the request id must be a string, got ${describeValue(value)}`);
      if (value !== '') request.id = value;
    } else if (key === PARAMETERS) {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw Errors.invalidArg(`Expected JSON object for keyword: 'parameters', got ${describeValue(value)}`);
      }
      for (const [name, parameter] of Object.entries(value))
        request.parameters[name] = parameterOf(name, parameter, "Converting keyword: 'parameters': ");
    } else {
      request.parameters[key] = parameterOf(key, value, '');
    }
  }
  return { modelName: model, ...(version !== undefined && { modelVersion: version }), ...request };
}

/** A request parameter: a string, a number or a boolean, as Triton's generate endpoint takes them. */
function parameterOf(name: string, value: unknown, context: string): string | number | boolean {
  if (typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'bigint') {
    if (value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(value);
    throw Errors.invalidArg(`${context}parameter '${name}' is ${value}, beyond the integers this server handles exactly (2^53)`);
  }
  throw Errors.invalidArg(
    `${context}parameter '${name}' has invalid type. Expected a string, a number or a boolean, got ${describeValue(value)}`,
  );
}

/**
 * A key naming a model input: a scalar or a flat array, shaped as Triton shapes it from the metadata's
 * shape (variable dimensions -1): fixed dimensions take their share of the elements from the innermost
 * out, the innermost variable one takes the rest, other variable ones are 1.
 */
function tensorOf(name: string, datatype: DataType, metadataShape: readonly number[], value: unknown): InferenceRequest['inputs'][number] {
  if (Array.isArray(value) && value.some(Array.isArray)) {
    throw Errors.invalidArg(`input '${name}' of a generate request must be a value or a flat array of values, not nested arrays`);
  }
  const elements = Array.isArray(value) ? value.length : 1;
  const shape = [...metadataShape];
  let rest = elements;
  for (let i = shape.length - 1; i >= 0; i--) {
    const dim = shape[i]!;
    if (dim === -1) continue;
    if (dim === 0 || rest % dim !== 0) throw cannotShape(name);
    rest /= dim;
  }
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i] !== -1) continue;
    shape[i] = rest;
    rest = 1;
  }
  if (rest !== 1) throw cannotShape(name);
  return { name, datatype, shape, data: decodeJsonTensorData(name, datatype, shape, value, 1) };
}

function cannotShape(name: string): Error {
  return Errors.invalidArg(`The schema can not convert input '${name}' to tensor with proper shape`);
}

/** A generate response's JSON text: the reserved keys, the response's parameters, then one key per output. */
export function encodeGenerateResponse(response: InferenceResponse): string {
  const parts = [`"model_name":${JSON.stringify(response.modelName)}`, `"model_version":${JSON.stringify(response.modelVersion)}`];
  if (response.id !== undefined && response.id !== '') parts.push(`"id":${JSON.stringify(response.id)}`);
  for (const [key, value] of Object.entries(response.parameters ?? {})) parts.push(`${JSON.stringify(key)}:${JSON.stringify(value)}`);
  for (const output of response.outputs) {
    const array = encodeJsonTensorData(output);
    // As Triton: an output of one element is that element, not an array of it.
    const single = output.shape.reduce((n, d) => n * d, 1) === 1;
    parts.push(`${JSON.stringify(output.name)}:${single ? array.slice(1, -1) : array}`);
  }
  return `{${parts.join(',')}}`;
}

/** An error as the generate endpoints send it: `{"error": "..."}`. */
export function encodeGenerateError(error: { readonly message: string }): string {
  return JSON.stringify({ error: error.message });
}
