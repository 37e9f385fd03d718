/**
 * @batchwise/protocol: what the server and its client share on the wire. The .proto files
 * (PROTO_DIR), the KServe datatypes and their typed arrays, the BYTES layout, the KServe JSON
 * reader (exact 64-bit integers, NaN and Infinity) and the wire shapes of metadata, index and
 * statistics. Pure: no server or client concern (errors are a ProtocolError each side maps).
 */
export { PROTO_DIR } from './protos.ts';
export { ProtocolError, isProtocolError } from './protocol-error.ts';
export { ERROR_CODES, isErrorCode, type ErrorCode } from './error-codes.ts';
export {
  CONFIG_TYPE_TO_DATATYPE,
  DATATYPE_TO_CONFIG_TYPE,
  DATATYPES,
  ELEMENT_BYTE_SIZE,
  TYPED_ARRAY_OF,
  isDataType,
  type DataType,
  type NumericArray,
  type TypedArrayConstructor,
} from './datatype.ts';
export {
  bytesElementsToStrings,
  countBytesElements,
  deserializeBytesElements,
  firstNonTextElement,
  forEachBytesElement,
  serializeBytesElements,
} from './bytes-codec.ts';
export { parseJsonLosslessly, parseTritonJson } from './json-text.ts';
export type * from './wire-types.ts';
