import { Buffer } from 'node:buffer';
import { countContents, FIXED64, LENGTH_DELIMITED, malformed, VARINT, WireCursor, type WireContents } from './wire-contents.ts';
import type {
  InferInputTensorWire,
  InferParameterWire,
  InferRequestedOutputTensorWire,
  ModelInferRequestWire,
  ParameterMapWire,
} from './wire-types.ts';

/**
 * ModelInferRequest read from the wire in one pass, into the objects @grpc/proto-loader's options give
 * (PROTO_LOADER_OPTIONS: defaults filled in, 64-bit integers as decimal text, oneofs named by their case
 * field), except each input's typed `contents`, which stay on the wire, found and counted
 * (wire-contents.ts).
 *
 * Why not protobufjs: its decode builds message objects and a Long per int64 (each shape dimension), its
 * toObject builds them all again as plain objects with the Longs as text, and the contents took a walk of
 * their own. That was 2.6-3.2 us and 1.6 KB of garbage per call of the tiny model, on the path of every
 * gRPC request (issue 44); this reads the same message in 0.75-1.1 us.
 *
 * A known field that arrives with another wire type is skipped as unknown, as protobuf's C++ parser
 * (Triton's) does; a truncated field or a varint of more than 10 bytes is INVALID_ARG.
 */
export function readModelInferRequest(message: Uint8Array): { request: ModelInferRequestWire; contents: (WireContents | undefined)[] } {
  const bytes = Buffer.isBuffer(message) ? message : Buffer.from(message.buffer, message.byteOffset, message.byteLength);
  const request: ModelInferRequestWire = {
    model_name: '',
    model_version: '',
    id: '',
    parameters: {},
    inputs: [],
    outputs: [],
    raw_input_contents: [],
  };
  const contents: (WireContents | undefined)[] = [];
  // Every field of ModelInferRequest is length-delimited.
  eachDelimitedField(bytes, 0, bytes.byteLength, (field, start, end) => {
    switch (field) {
      case 1:
        request.model_name = bytes.toString('utf8', start, end);
        break;
      case 2:
        request.model_version = bytes.toString('utf8', start, end);
        break;
      case 3:
        request.id = bytes.toString('utf8', start, end);
        break;
      case 4:
        readParameterEntry(bytes, start, end, request.parameters!);
        break;
      case 5: {
        const { input, found } = readInput(bytes, start, end);
        request.inputs.push(input);
        contents.push(found);
        break;
      }
      case 6:
        request.outputs!.push(readOutput(bytes, start, end));
        break;
      case 7:
        request.raw_input_contents!.push(bytes.subarray(start, end));
        break;
    }
  });
  return { request, contents };
}

function readInput(bytes: Buffer, start: number, end: number): { input: InferInputTensorWire; found: WireContents | undefined } {
  const input: InferInputTensorWire = { name: '', datatype: '', shape: [], parameters: {} };
  let ranges: [number, number][] | undefined;
  const cursor = new WireCursor(bytes, start, end);
  while (!cursor.done) {
    const tag = cursor.varint();
    const field = tag >>> 3;
    const wireType = tag & 7;
    if (field === 3 && wireType === VARINT) {
      input.shape.push(int64Text(cursor.varint(), cursor.high));
      continue;
    }
    if (wireType !== LENGTH_DELIMITED || cursor.high !== 0) {
      cursor.skip(wireType);
      continue;
    }
    const fieldEnd = cursor.delimited();
    const fieldStart = cursor.pos;
    switch (field) {
      case 1:
        input.name = bytes.toString('utf8', fieldStart, fieldEnd);
        break;
      case 2:
        input.datatype = bytes.toString('utf8', fieldStart, fieldEnd);
        break;
      case 3:
        // Packed, as clients send it.
        while (cursor.pos < fieldEnd) input.shape.push(int64Text(cursor.varint(), cursor.high));
        if (cursor.pos !== fieldEnd) throw malformed('a packed shape runs past its length');
        break;
      case 4:
        readParameterEntry(bytes, fieldStart, fieldEnd, input.parameters!);
        break;
      case 5:
        // protobuf merges a message field sent more than once: each part is read.
        (ranges ??= []).push([fieldStart, fieldEnd]);
        break;
    }
    cursor.pos = fieldEnd;
  }
  return { input, found: ranges && countContents(bytes, ranges) };
}

function readOutput(bytes: Buffer, start: number, end: number): InferRequestedOutputTensorWire {
  const output: InferRequestedOutputTensorWire = { name: '', parameters: {} };
  eachDelimitedField(bytes, start, end, (field, fieldStart, fieldEnd) => {
    if (field === 1) output.name = bytes.toString('utf8', fieldStart, fieldEnd);
    else if (field === 2) readParameterEntry(bytes, fieldStart, fieldEnd, output.parameters!);
  });
  return output;
}

/** One entry of a map<string, InferParameter>: a later entry of the same key replaces it; a missing value is the empty parameter. */
function readParameterEntry(bytes: Buffer, start: number, end: number, map: ParameterMapWire): void {
  let key = '';
  let value: InferParameterWire = {};
  eachDelimitedField(bytes, start, end, (field, fieldStart, fieldEnd) => {
    if (field === 1) key = bytes.toString('utf8', fieldStart, fieldEnd);
    else if (field === 2) value = readParameter(bytes, fieldStart, fieldEnd);
  });
  // A key named like Object.prototype's accessor stays a key of its own.
  if (key === '__proto__') Object.defineProperty(map, key, { value, enumerable: true, writable: true, configurable: true });
  else map[key] = value;
}

/** InferParameter: the member of its oneof read last. */
function readParameter(bytes: Buffer, start: number, end: number): InferParameterWire {
  let parameter: InferParameterWire = {};
  const cursor = new WireCursor(bytes, start, end);
  while (!cursor.done) {
    const tag = cursor.varint();
    const wireType = tag & 7;
    switch (cursor.high === 0 ? tag >>> 3 : 0) {
      case 1:
        if (wireType !== VARINT) break;
        parameter = { bool_param: (cursor.varint() | cursor.high) !== 0, parameter_choice: 'bool_param' };
        continue;
      case 2:
        if (wireType !== VARINT) break;
        parameter = { int64_param: int64Text(cursor.varint(), cursor.high), parameter_choice: 'int64_param' };
        continue;
      case 3:
        if (wireType !== LENGTH_DELIMITED) break;
        {
          const fieldEnd = cursor.delimited();
          parameter = { string_param: bytes.toString('utf8', cursor.pos, fieldEnd), parameter_choice: 'string_param' };
          cursor.pos = fieldEnd;
        }
        continue;
      case 4:
        if (wireType !== FIXED64) break;
        cursor.advance(8);
        parameter = { double_param: bytes.readDoubleLE(cursor.pos - 8), parameter_choice: 'double_param' };
        continue;
      case 5:
        if (wireType !== VARINT) break;
        parameter = { uint64_param: uint64Text(cursor.varint(), cursor.high), parameter_choice: 'uint64_param' };
        continue;
    }
    cursor.skip(wireType);
  }
  return parameter;
}

/**
 * Calls `visit` with each length-delimited field of the message at [start, end) of `bytes`, in order: its
 * number and its bytes' range. Fields of other wire types are skipped.
 */
function eachDelimitedField(bytes: Buffer, start: number, end: number, visit: (field: number, start: number, end: number) => void): void {
  const cursor = new WireCursor(bytes, start, end);
  while (!cursor.done) {
    const tag = cursor.varint();
    if ((tag & 7) !== LENGTH_DELIMITED || cursor.high !== 0) {
      cursor.skip(tag & 7);
      continue;
    }
    const fieldEnd = cursor.delimited();
    visit(tag >>> 3, cursor.pos, fieldEnd);
    cursor.pos = fieldEnd;
  }
}

const TWO_32 = 4294967296;

/** A varint's 64 bits (`low`, `high`, both unsigned) as a signed decimal, as protobufjs writes an int64 Long. */
export function int64Text(low: number, high: number): string {
  if (high === 0) return String(low);
  // Within 2^53 either side the double is exact.
  if (high < 0x200000) return String(high * TWO_32 + low);
  if (high >= 0xffe00000) return String((high - TWO_32) * TWO_32 + low);
  return BigInt.asIntN(64, (BigInt(high) << 32n) | BigInt(low)).toString();
}

/** The same bits as an unsigned decimal (uint64). */
export function uint64Text(low: number, high: number): string {
  if (high < 0x200000) return String(high * TWO_32 + low);
  return ((BigInt(high) << 32n) | BigInt(low)).toString();
}
