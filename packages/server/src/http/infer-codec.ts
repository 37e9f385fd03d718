import {
  Errors,
  inputSharedMemoryRefOf,
  sharedMemoryRefOf,
  type InferenceRequest,
  type InferenceResponse,
  type RequestedOutput,
  type RequestInput,
} from '../core/index.ts';
import { checkedElementCount, expectedByteSize, validateShape } from '../tensor/byte-size.ts';
import { countBytesElements } from '../tensor/bytes-codec.ts';
import { isDataType, type DataType } from '../tensor/datatype.ts';
import { describeValue } from '../tensor/describe-value.ts';
import { decodeJsonTensorData, encodeJsonTensorData } from '../tensor/json-codec.ts';
import { checkJsonNesting, parseRequestJson } from '../tensor/json-text.ts';
import { formatShape } from '../tensor/shape.ts';
import type { Parameters, Tensor } from '../tensor/tensor.ts';

export const HEADER_LENGTH_HEADER = 'Inference-Header-Content-Length';
/** The same header as Node's request headers and fastify's replies spell it. */
export const HEADER_LENGTH = 'inference-header-content-length';

type Json = Record<string, unknown>;

/** Levels of JSON around an input's `data` in an infer body: the body, `inputs`, the input. */
const DATA_DEPTH = 3;

/**
 * Decodes a KServe v2 HTTP infer body: JSON, or JSON followed by binary tensor data when
 * `Inference-Header-Content-Length` is given, or with that header 0 Triton's raw binary request
 * (the body is the model's only input; the core deduces its name and shape; every output comes
 * back binary). Binary inputs are views on `body` (no copies).
 */
export function decodeHttpInferRequest(
  body: Buffer,
  headerLength: string | undefined,
  modelName: string,
  modelVersion: string | undefined,
  /** Called with the JSON part before it is parsed (memory/element admission, json-admission.ts). */
  beforeParse?: (json: Buffer) => void,
): InferenceRequest {
  const jsonLength = headerLength === undefined ? body.length : parseHeaderLength(headerLength, body.length);
  if (jsonLength === 0 && headerLength !== undefined) {
    return {
      modelName,
      ...(modelVersion !== undefined && { modelVersion }),
      inputs: [],
      rawInput: new Uint8Array(body.buffer, body.byteOffset, body.length),
      parameters: { binary_data_output: true },
    };
  }
  const json = body.subarray(0, jsonLength);
  beforeParse?.(json);
  const header = parseJsonObject(json, { parse: parseRequestJson });

  const rawInputs = header['inputs'];
  if (!Array.isArray(rawInputs)) throw Errors.invalidArg("the request must have an 'inputs' array");
  let binaryOffset = jsonLength;
  const inputs = rawInputs.map((raw: unknown, i): RequestInput => {
    const input = jsonObject(raw, `input ${i}`);
    const name = input['name'];
    if (typeof name !== 'string' || name === '') throw Errors.invalidArg(`input ${i} must have a non-empty string 'name'`);
    const datatype = input['datatype'];
    if (!isDataType(datatype)) throw Errors.invalidArg(`input '${name}' has unknown datatype ${describeValue(datatype)}`);
    if (input['shape'] === undefined) throw Errors.invalidArg(`input '${name}' must have a 'shape' array`);
    refuseNegativeDimension(input['shape'], name);
    const shape = validateShape(input['shape'], name, datatype);
    const parameters = parameterObject(input['parameters'], `parameters of input '${name}'`);
    const binarySize = parameters['binary_data_size'];
    const hasData = input['data'] !== undefined;
    const sharedMemory = inputSharedMemoryRefOf(name, datatype, shape, parameters);
    if (sharedMemory) {
      if (hasData || binarySize !== undefined) {
        throw Errors.invalidArg(
          `input '${name}' is in shared memory region '${sharedMemory.region}' and must not also have 'data' or a binary_data_size parameter`,
        );
      }
      return { name, datatype, shape, data: new Uint8Array(0), sharedMemory };
    }
    if (binarySize === undefined) {
      if (!hasData) throw Errors.invalidArg(`input '${name}' has neither 'data' nor a binary_data_size parameter`);
      return { name, datatype, shape, data: decodeJsonTensorData(name, datatype, shape, input['data'], DATA_DEPTH) };
    }
    if (typeof binarySize !== 'number' || !Number.isSafeInteger(binarySize) || binarySize < 0) {
      throw Errors.invalidArg(`binary_data_size of input '${name}' must be a non-negative integer, got ${describeValue(binarySize)}`);
    }
    if (hasData) throw Errors.invalidArg(`input '${name}' has both 'data' and a binary_data_size parameter`);
    if (datatype !== 'BYTES') {
      const expected = expectedByteSize(datatype, shape, name);
      if (binarySize !== expected) {
        throw Errors.invalidArg(
          `input '${name}' has binary_data_size ${binarySize}, but shape ${formatShape(shape)} of ${datatype} needs ${expected} bytes`,
        );
      }
    }
    if (binarySize > body.length - binaryOffset) {
      throw Errors.invalidArg(
        `input '${name}' declares binary_data_size ${binarySize}, but only ${body.length - binaryOffset} bytes of binary data remain`,
      );
    }
    const data = new Uint8Array(body.buffer, body.byteOffset + binaryOffset, binarySize);
    binaryOffset += binarySize;
    if (datatype === 'BYTES') checkBytesElementCount(name, shape, data);
    return { name, datatype, shape, data };
  });
  if (binaryOffset !== body.length) {
    throw Errors.invalidArg(`${body.length - binaryOffset} bytes of binary data follow the inputs and no input claims them`);
  }

  const id = header['id'];
  if (id !== undefined && typeof id !== 'string') throw Errors.invalidArg(`'id' must be a string, got ${describeValue(id)}`);
  // A uint64 sequence_id past 2^53 is read exactly here: parameterObject keeps numbers only.
  const sequenceId = (header['parameters'] as Json | undefined)?.['sequence_id'];
  const parameters = parameterObject(header['parameters'], 'request parameters');
  checkBoolean(parameters, 'binary_data_output', 'request parameters');
  const outputs = parseOutputs(header['outputs']);
  return {
    ...(id !== undefined && { id }),
    modelName,
    ...(modelVersion !== undefined && { modelVersion }),
    inputs,
    ...(outputs !== undefined && { outputs }),
    parameters,
    ...(typeof sequenceId === 'bigint' && { sequenceId }),
  };
}

/**
 * Triton reads a JSON shape's dimensions as unsigned integers, and a negative one fails that read
 * with an INTERNAL error (500) its tests expect; validateShape refuses every other bad dimension.
 */
function refuseNegativeDimension(shape: unknown, name: string): void {
  if (!Array.isArray(shape)) return;
  const i = shape.findIndex((d: unknown) => (typeof d === 'number' || typeof d === 'bigint') && d < 0);
  if (i >= 0) throw Errors.shapeNotUnsigned(`dimension ${i} of input '${name}' is ${String(shape[i])}`);
}

function parseHeaderLength(value: string, bodyLength: number): number {
  const n = /^\s*\d+\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n > bodyLength) {
    throw Errors.invalidArg(
      `${HEADER_LENGTH_HEADER} (${describeValue(value)}) must be a non-negative integer no larger than the body (${bodyLength} bytes)`,
    );
  }
  return n;
}

export interface JsonObjectOptions {
  /** The parser: JSON.parse by default; infer bodies use parseRequestJson (exact 64-bit integers, NaN and Infinity tokens). */
  readonly parse?: (text: string) => unknown;
  /** Checks fields before the nesting limit, where Triton answers a bad field however deep it nests (repository index's `ready`). */
  readonly checkFirst?: (json: Json) => void;
}

/** A JSON object from a request body, or a 400 that says what was wrong. */
export function parseJsonObject(bytes: Buffer, options: JsonObjectOptions = {}): Json {
  const parse = options.parse ?? JSON.parse;
  let parsed: unknown;
  try {
    parsed = parse(bytes.toString('utf8'));
  } catch (error) {
    throw Errors.invalidArg(`failed to parse the request JSON buffer: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw Errors.invalidArg(`the request JSON must be an object, got ${describeValue(parsed)}`);
  }
  options.checkFirst?.(parsed as Json);
  // Infer bodies can be large: their one deep structure, tensor data, is checked as it is flattened.
  if (parse === JSON.parse) checkJsonNesting(parsed);
  return parsed as Json;
}

function jsonObject(raw: unknown, what: string): Json {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw Errors.invalidArg(`${what} must be a JSON object, got ${describeValue(raw)}`);
  }
  return raw as Json;
}

function checkBytesElementCount(name: string, shape: readonly number[], data: Uint8Array): void {
  const expected = checkedElementCount(shape, name);
  const found = countBytesElements(data, name);
  if (found !== expected) {
    throw Errors.invalidArg(`input '${name}' holds ${found} BYTES elements, but shape ${formatShape(shape)} needs ${expected}`);
  }
}

function parseOutputs(raw: unknown): RequestedOutput[] | undefined {
  if (raw === undefined) return undefined;
  if (!Array.isArray(raw)) throw Errors.invalidArg(`'outputs' must be an array, got ${describeValue(raw)}`);
  return raw.map((o: unknown, i): RequestedOutput => {
    const output = jsonObject(o, `output ${i}`);
    const name = output['name'];
    if (typeof name !== 'string' || name === '') throw Errors.invalidArg(`output ${i} must have a non-empty string 'name'`);
    const what = `parameters of output '${name}'`;
    const parameters = parameterObject(output['parameters'], what);
    checkBoolean(parameters, 'binary_data', what);
    const sharedMemory = sharedMemoryRefOf(parameters, `output '${name}'`);
    if (sharedMemory && parameters['binary_data'] === true) {
      throw Errors.invalidArg(`output '${name}': Output can't set both 'shared_memory_region' and 'binary_data'`);
    }
    return { name, parameters, ...(sharedMemory && { sharedMemory }) };
  });
}

function parameterObject(raw: unknown, what: string): Parameters {
  if (raw === undefined || raw === null) return {};
  const object = jsonObject(raw, what);
  for (const key in object) {
    if (!Object.hasOwn(object, key)) continue;
    const value = object[key];
    // Parameters are numbers here: an integer beyond 2^53 is rounded, as JSON.parse would.
    if (typeof value === 'bigint') {
      object[key] = Number(value);
      continue;
    }
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
      throw Errors.invalidArg(`${what}: '${key}' must be a string, number or boolean, got ${describeValue(value)}`);
    }
  }
  return object as Parameters;
}

function checkBoolean(parameters: Parameters, key: string, what: string): void {
  const value = parameters[key];
  if (value !== undefined && typeof value !== 'boolean') {
    throw Errors.invalidArg(`${what}: '${key}' must be true or false, got ${describeValue(value)}`);
  }
}

export interface EncodedHttpResponse {
  readonly chunks: Buffer[];
  /** Set when binary data follows the JSON: the value of Inference-Header-Content-Length. */
  readonly headerLength?: number;
  readonly contentType: string;
}

/** Which outputs of a request are written as JSON text rather than binary data (FP16 and BF16 never are). */
export function outputsSentAsJson(request: InferenceRequest): (output: { name: string; datatype: DataType }) => boolean {
  const binaryByDefault = request.parameters['binary_data_output'] === true;
  if (!request.outputs || request.outputs.length === 0) return binaryByDefault ? NONE_AS_JSON : HALF_FLOATS_BINARY;
  const requested = new Map(request.outputs.map((o) => [o.name, o.parameters['binary_data']]));
  return ({ name, datatype }) => {
    const asked = requested.get(name);
    return !(datatype === 'FP16' || datatype === 'BF16' || asked === true || (asked !== false && binaryByDefault));
  };
}

/** No output asked for by name: every one binary (binary_data_output), or all but FP16 and BF16 as JSON. */
const NONE_AS_JSON = (): boolean => false;
const HALF_FLOATS_BINARY = ({ datatype }: { datatype: DataType }): boolean => !(datatype === 'FP16' || datatype === 'BF16');

/** An output's name, datatype and shape as JSON, without its closing brace: what follows depends on how it is sent. */
function outputHead(tensor: Tensor): string {
  return `{"name":${JSON.stringify(tensor.name)},"datatype":"${tensor.datatype}","shape":[${tensor.shape.join(',')}]`;
}

/** Encodes an infer response; binary outputs are appended as they are (no JSON, no copies). */
export function encodeHttpInferResponse(response: InferenceResponse, request: InferenceRequest): EncodedHttpResponse {
  const sentAsJson = outputsSentAsJson(request);
  const binaryChunks: Buffer[] = [];
  // Outputs are written as JSON text: tensor data carries tokens JSON.stringify cannot write.
  const outputs = response.outputs.map((tensor) => {
    const head = outputHead(tensor);
    // As Triton: an output written to shared memory is described, not sent.
    if (tensor.sharedMemory) return `${head}}`;
    if (sentAsJson(tensor)) return `${head},"data":${encodeJsonTensorData(tensor)}}`;
    binaryChunks.push(Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength));
    return `${head},"parameters":{"binary_data_size":${tensor.data.byteLength}}}`;
  });
  // Written as text rather than through objects for JSON.stringify: a request's reply is on the common path.
  let head = `{"model_name":${JSON.stringify(response.modelName)},"model_version":${JSON.stringify(response.modelVersion)}`;
  if (response.id !== undefined) head += `,"id":${JSON.stringify(response.id)}`;
  if (response.parameters !== undefined) head += `,"parameters":${JSON.stringify(response.parameters)}`;
  const json = Buffer.from(`${head},"outputs":[${outputs.join(',')}]}`);
  if (binaryChunks.length === 0) return { chunks: [json], contentType: 'application/json' };
  return { chunks: [json, ...binaryChunks], headerLength: json.length, contentType: 'application/octet-stream' };
}
