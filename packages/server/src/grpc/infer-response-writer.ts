import type { InferenceResponse } from '../core/index.ts';
import type { ParameterValue, Parameters } from '../tensor/tensor.ts';
import { PREFIX_BYTES } from './transport/message-framing.ts';

/**
 * ModelInferResponse and ModelStreamInferResponse written by hand, straight into one Buffer that
 * starts with the gRPC message prefix: the reply of every ModelInfer call, so it skips the objects,
 * the protobufjs writer and the copy into a framed message that encoding through protobufjs costs.
 * The bytes are protobufjs's for the object the frontend used to build (infer-response-writer.test.ts
 * checks them bit for bit): fields in number order, model_name, model_version and id always written
 * (empty included), parameters as map entries in the object's key order (booleans bool_param,
 * strings string_param, safe integers int64_param, other numbers double_param), each output's name,
 * datatype and packed shape, and one raw_output_contents entry per output (empty for one written to
 * shared memory, so that clients indexing them by output position find the others).
 */

/** What a response written here carries: an InferenceResponse, or an error's empty one in a stream. */
export type ResponseFields = Pick<InferenceResponse, 'modelName' | 'modelVersion' | 'id' | 'parameters' | 'outputs'>;

/** Triton's response parameter that says whether a stream response is its request's last. */
export const FINAL_RESPONSE_PARAMETER = 'triton_final_response';

const EMPTY = new Uint8Array(0);

/** The ModelInferResponse of `response`, framed for the wire. */
export function frameInferResponse(response: ResponseFields): Buffer {
  const size = responseSize(response, undefined);
  const out = Buffer.allocUnsafe(PREFIX_BYTES + size);
  writePrefix(out, size);
  const end = writeResponse(out, PREFIX_BYTES, response, undefined);
  return checked(out, end);
}

/**
 * A ModelStreamInferResponse framed for the wire: `errorMessage` (empty for a response) and the
 * response, with `triton_final_response` set to `final` among its parameters.
 */
export function frameStreamInferResponse(errorMessage: string, response: ResponseFields, final: boolean): Buffer {
  const errorBytes = Buffer.byteLength(errorMessage);
  const inner = responseSize(response, final);
  const size = 1 + varintSize(errorBytes) + errorBytes + 1 + varintSize(inner) + inner;
  const out = Buffer.allocUnsafe(PREFIX_BYTES + size);
  writePrefix(out, size);
  let at = writeString(out, PREFIX_BYTES, 0x0a, errorMessage, errorBytes);
  out[at++] = 0x12;
  at = writeVarint(out, at, inner);
  const end = writeResponse(out, at, response, final);
  return checked(out, end);
}

function writePrefix(out: Buffer, size: number): void {
  out[0] = 0;
  out.writeUInt32BE(size, 1);
}

function checked(out: Buffer, end: number): Buffer {
  if (end !== out.length) throw new Error(`ModelInferResponse writer: wrote ${end} bytes of ${out.length}`);
  return out;
}

// Sizes ---------------------------------------------------------------------------------------

function responseSize(r: ResponseFields, final: boolean | undefined): number {
  let size = stringFieldSize(r.modelName) + stringFieldSize(r.modelVersion) + stringFieldSize(r.id ?? '');
  size += parametersSize(r.parameters, final);
  for (const output of r.outputs) {
    const tensor = outputSize(output.name, output.datatype, output.shape);
    size += 1 + varintSize(tensor) + tensor;
    const bytes = output.sharedMemory ? 0 : output.data.byteLength;
    size += 1 + varintSize(bytes) + bytes;
  }
  return size;
}

function outputSize(name: string, datatype: string, shape: readonly number[]): number {
  let size = stringFieldSize(name) + stringFieldSize(datatype);
  if (shape.length > 0) {
    const packed = shapeSize(shape);
    size += 1 + varintSize(packed) + packed;
  }
  return size;
}

function shapeSize(shape: readonly number[]): number {
  let size = 0;
  for (const d of shape) size += int64Size(d);
  return size;
}

function parametersSize(parameters: Parameters | undefined, final: boolean | undefined): number {
  let size = 0;
  if (parameters !== undefined) {
    for (const key in parameters) {
      const value = key === FINAL_RESPONSE_PARAMETER && final !== undefined ? final : parameters[key]!;
      const entry = entrySize(key, value);
      size += 1 + varintSize(entry) + entry;
    }
  }
  if (final !== undefined && (parameters === undefined || !(FINAL_RESPONSE_PARAMETER in parameters))) {
    const entry = entrySize(FINAL_RESPONSE_PARAMETER, final);
    size += 1 + varintSize(entry) + entry;
  }
  return size;
}

function entrySize(key: string, value: ParameterValue): number {
  const parameter = parameterSize(value);
  return stringFieldSize(key) + 1 + varintSize(parameter) + parameter;
}

function parameterSize(value: ParameterValue): number {
  if (typeof value === 'boolean') return 2;
  if (typeof value === 'string') return stringFieldSize(value);
  return Number.isSafeInteger(value) ? 1 + int64Size(value) : 9;
}

function stringFieldSize(value: string): number {
  const bytes = Buffer.byteLength(value);
  return 1 + varintSize(bytes) + bytes;
}

function varintSize(n: number): number {
  if (n < 0x80) return 1;
  if (n < 0x4000) return 2;
  if (n < 0x200000) return 3;
  if (n < 0x10000000) return 4;
  let size = 5;
  for (let rest = Math.floor(n / 0x800000000); rest > 0; rest = Math.floor(rest / 0x80)) size++;
  return size;
}

/** An int64 varint: a negative value is its 64-bit two's complement, ten bytes. */
function int64Size(n: number): number {
  return n < 0 ? 10 : varintSize(n);
}

// Writing -------------------------------------------------------------------------------------

function writeResponse(out: Buffer, at: number, r: ResponseFields, final: boolean | undefined): number {
  at = writeString(out, at, 0x0a, r.modelName);
  at = writeString(out, at, 0x12, r.modelVersion);
  at = writeString(out, at, 0x1a, r.id ?? '');
  const parameters = r.parameters;
  if (parameters !== undefined) {
    for (const key in parameters) {
      at = writeEntry(out, at, key, key === FINAL_RESPONSE_PARAMETER && final !== undefined ? final : parameters[key]!);
    }
  }
  if (final !== undefined && (parameters === undefined || !(FINAL_RESPONSE_PARAMETER in parameters))) {
    at = writeEntry(out, at, FINAL_RESPONSE_PARAMETER, final);
  }
  for (const output of r.outputs) {
    out[at++] = 0x2a;
    at = writeVarint(out, at, outputSize(output.name, output.datatype, output.shape));
    at = writeString(out, at, 0x0a, output.name);
    at = writeString(out, at, 0x12, output.datatype);
    if (output.shape.length > 0) {
      out[at++] = 0x1a;
      at = writeVarint(out, at, shapeSize(output.shape));
      for (const d of output.shape) at = writeInt64(out, at, d);
    }
  }
  for (const output of r.outputs) {
    const data = output.sharedMemory ? EMPTY : output.data;
    out[at++] = 0x32;
    at = writeVarint(out, at, data.byteLength);
    out.set(data, at);
    at += data.byteLength;
  }
  return at;
}

/** A map<string, InferParameter> entry (field 4): key (1), value (2). */
function writeEntry(out: Buffer, at: number, key: string, value: ParameterValue): number {
  out[at++] = 0x22;
  at = writeVarint(out, at, entrySize(key, value));
  at = writeString(out, at, 0x0a, key);
  out[at++] = 0x12;
  at = writeVarint(out, at, parameterSize(value));
  if (typeof value === 'boolean') {
    out[at++] = 0x08;
    out[at++] = value ? 1 : 0;
  } else if (typeof value === 'string') {
    at = writeString(out, at, 0x1a, value);
  } else if (Number.isSafeInteger(value)) {
    out[at++] = 0x10;
    at = writeInt64(out, at, value);
  } else {
    out[at++] = 0x21;
    at = out.writeDoubleLE(value, at);
  }
  return at;
}

function writeString(out: Buffer, at: number, tag: number, value: string, bytes = Buffer.byteLength(value)): number {
  out[at++] = tag;
  at = writeVarint(out, at, bytes);
  if (bytes === value.length && bytes <= 64) {
    // Short ASCII, copied by hand (cheaper than Buffer#write there): a string whose UTF-8 length is
    // its length in UTF-16 units has no character beyond 0x7F.
    for (let i = 0; i < bytes; i++) out[at + i] = value.charCodeAt(i);
    return at + bytes;
  }
  return at + out.write(value, at, bytes, 'utf8');
}

function writeVarint(out: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    out[at++] = (n % 0x80) | 0x80;
    n = Math.floor(n / 0x80);
  }
  out[at++] = n;
  return at;
}

function writeInt64(out: Buffer, at: number, n: number): number {
  if (n >= 0) return writeVarint(out, at, n);
  let bits = BigInt.asUintN(64, BigInt(n));
  for (let i = 0; i < 9; i++) {
    out[at++] = Number(bits & 0x7fn) | 0x80;
    bits >>= 7n;
  }
  out[at++] = Number(bits);
  return at;
}
