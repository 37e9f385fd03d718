import { Errors, type InferenceRequest, type InferenceResponse, type RequestedOutput } from '../core/index.ts';
import { countBytesElements } from '../tensor/bytes-codec.ts';
import { ELEMENT_BYTE_SIZE, isDataType } from '../tensor/datatype.ts';
import { decodeJsonTensorData, encodeJsonTensorData } from '../tensor/json-codec.ts';
import { elementCount, formatShape } from '../tensor/shape.ts';
import type { Parameters, Tensor } from '../tensor/tensor.ts';

const MAX_DIMS = 64;
const MAX_BYTES = 2 ** 31;

type Json = Record<string, unknown>;

/**
 * Decodes a KServe v2 HTTP infer body: JSON, or JSON followed by binary tensor data when
 * `Inference-Header-Content-Length` is given. Binary inputs are views on `body` (no copies).
 */
export function decodeHttpInferRequest(
  body: Buffer,
  headerLength: string | undefined,
  modelName: string,
  modelVersion: string | undefined,
): InferenceRequest {
  let jsonLength = body.length;
  if (headerLength !== undefined) {
    const n = Number(headerLength);
    if (!/^\d+$/.test(headerLength.trim()) || !Number.isSafeInteger(n) || n > body.length) {
      throw Errors.invalidArg(
        `Inference-Header-Content-Length (${headerLength}) must be a non-negative integer no larger than the body (${body.length} bytes)`,
      );
    }
    jsonLength = n;
  }
  const header = parseJson(body.subarray(0, jsonLength));
  let binaryOffset = jsonLength;

  const rawInputs = header['inputs'];
  if (!Array.isArray(rawInputs)) throw Errors.invalidArg("the request must have an 'inputs' array");
  const names = new Set<string>();
  const inputs: Tensor[] = rawInputs.map((raw: unknown, i) => {
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw Errors.invalidArg(`input ${i} must be a JSON object`);
    const input = raw as Json;
    const name = input['name'];
    if (typeof name !== 'string' || name === '') throw Errors.invalidArg(`input ${i} must have a non-empty string 'name'`);
    if (names.has(name)) throw Errors.invalidArg(`input '${name}' appears more than once`);
    names.add(name);
    const datatype = input['datatype'];
    if (!isDataType(datatype)) throw Errors.invalidArg(`input '${name}' has unknown datatype ${JSON.stringify(datatype)}`);
    const shape = parseShape(name, input['shape']);
    const parameters = parameterObject(input['parameters'], `parameters of input '${name}'`);
    const binarySize = parameters['binary_data_size'];
    if (binarySize !== undefined) {
      if (typeof binarySize !== 'number' || !Number.isSafeInteger(binarySize) || binarySize < 0) {
        throw Errors.invalidArg(`binary_data_size of input '${name}' must be a non-negative integer`);
      }
      if (input['data'] !== undefined) throw Errors.invalidArg(`input '${name}' has both 'data' and binary_data_size`);
      if (binaryOffset + binarySize > body.length) {
        throw Errors.invalidArg(
          `input '${name}' declares binary_data_size ${binarySize}, but only ${body.length - binaryOffset} bytes of binary data remain`,
        );
      }
      const data = new Uint8Array(body.buffer, body.byteOffset + binaryOffset, binarySize);
      binaryOffset += binarySize;
      checkBinarySize(name, datatype, shape, data);
      return { name, datatype, shape, data };
    }
    if (input['data'] === undefined) throw Errors.invalidArg(`input '${name}' has neither 'data' nor binary_data_size`);
    return { name, datatype, shape, data: decodeJsonTensorData(name, datatype, shape, input['data']) };
  });
  if (binaryOffset !== body.length) {
    throw Errors.invalidArg(`${body.length - binaryOffset} bytes of binary data follow the inputs that no input claims`);
  }

  const outputs = parseOutputs(header['outputs']);
  const id = header['id'];
  if (id !== undefined && typeof id !== 'string') throw Errors.invalidArg("'id' must be a string");
  return {
    ...(id !== undefined && { id }),
    modelName,
    ...(modelVersion !== undefined && { modelVersion }),
    inputs,
    outputs,
    parameters: parameterObject(header['parameters'], 'request parameters'),
  };
}

function parseJson(bytes: Buffer): Json {
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw Errors.invalidArg(`failed to parse the request JSON buffer: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw Errors.invalidArg('the request body must be a JSON object');
  }
  return parsed as Json;
}

function parseShape(name: string, shape: unknown): number[] {
  if (!Array.isArray(shape)) throw Errors.invalidArg(`input '${name}' must have a 'shape' array`);
  if (shape.length > MAX_DIMS) throw Errors.invalidArg(`input '${name}' has ${shape.length} dimensions; at most ${MAX_DIMS} are supported`);
  let count = 1;
  for (const d of shape) {
    if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0) {
      throw Errors.invalidArg(`shape of input '${name}' must hold non-negative integers, got ${JSON.stringify(shape)}`);
    }
    count *= d;
    if (count > MAX_BYTES) throw Errors.invalidArg(`shape ${formatShape(shape)} of input '${name}' is too large`);
  }
  return shape as number[];
}

function checkBinarySize(name: string, datatype: Tensor['datatype'], shape: number[], data: Uint8Array): void {
  if (datatype === 'BYTES') {
    const found = countBytesElements(data, name);
    if (found !== elementCount(shape)) {
      throw Errors.invalidArg(`input '${name}' holds ${found} BYTES elements, but shape ${formatShape(shape)} needs ${elementCount(shape)}`);
    }
    return;
  }
  const expected = elementCount(shape) * ELEMENT_BYTE_SIZE[datatype];
  if (data.byteLength !== expected) {
    throw Errors.invalidArg(
      `input '${name}' has binary_data_size ${data.byteLength}, but shape ${formatShape(shape)} of ${datatype} needs ${expected} bytes`,
    );
  }
}

function parseOutputs(raw: unknown): RequestedOutput[] | undefined {
  if (raw === undefined) return undefined;
  if (!Array.isArray(raw)) throw Errors.invalidArg("'outputs' must be an array");
  const seen = new Set<string>();
  return raw.map((o: unknown, i) => {
    if (typeof o !== 'object' || o === null) throw Errors.invalidArg(`output ${i} must be a JSON object`);
    const name = (o as Json)['name'];
    if (typeof name !== 'string' || name === '') throw Errors.invalidArg(`output ${i} must have a non-empty string 'name'`);
    if (seen.has(name)) throw Errors.invalidArg(`output '${name}' is requested more than once`);
    seen.add(name);
    const parameters = parameterObject((o as Json)['parameters'], `parameters of output '${name}'`);
    if (parameters['classification'] !== undefined) {
      throw Errors.unsupported(`output '${name}': the classification extension is not supported by Batchwise yet`);
    }
    return { name, parameters };
  });
}

function parameterObject(raw: unknown, what: string): Parameters {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw Errors.invalidArg(`${what} must be a JSON object`);
  for (const [key, value] of Object.entries(raw)) {
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
      throw Errors.invalidArg(`${what}: '${key}' must be a string, number or boolean`);
    }
  }
  return raw as Parameters;
}

export interface EncodedHttpResponse {
  readonly chunks: Buffer[];
  /** Set when binary data follows the JSON: the value of Inference-Header-Content-Length. */
  readonly headerLength?: number;
  readonly contentType: string;
}

/** Encodes an infer response; binary outputs are appended as they are (no JSON, no copies). */
export function encodeHttpInferResponse(response: InferenceResponse, request: InferenceRequest): EncodedHttpResponse {
  const requested = new Map((request.outputs ?? []).map((o) => [o.name, o.parameters]));
  const binaryDefault = request.parameters['binary_data_output'] === true;
  const binaryChunks: Buffer[] = [];
  const outputs = response.outputs.map((tensor) => {
    const asked = requested.get(tensor.name)?.['binary_data'];
    const binary = tensor.datatype === 'FP16' || tensor.datatype === 'BF16' || asked === true || (asked === undefined && binaryDefault);
    const base = { name: tensor.name, datatype: tensor.datatype, shape: tensor.shape };
    if (!binary) return { ...base, data: encodeJsonTensorData(tensor) };
    binaryChunks.push(Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength));
    return { ...base, parameters: { binary_data_size: tensor.data.byteLength } };
  });
  const json = Buffer.from(
    JSON.stringify({
      model_name: response.modelName,
      model_version: response.modelVersion,
      ...(response.id !== undefined && { id: response.id }),
      ...(response.parameters !== undefined && { parameters: response.parameters }),
      outputs,
    }),
  );
  if (binaryChunks.length === 0) return { chunks: [json], contentType: 'application/json' };
  return { chunks: [json, ...binaryChunks], headerLength: json.length, contentType: 'application/octet-stream' };
}
