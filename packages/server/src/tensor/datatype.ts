/** The KServe datatypes and their typed arrays live in @batchwise/protocol, shared with the client. */
export {
  CONFIG_TYPE_TO_DATATYPE,
  DATATYPE_TO_CONFIG_TYPE,
  DATATYPES,
  ELEMENT_BYTE_SIZE,
  TYPED_ARRAY_OF,
  isDataType,
  type DataType,
  type NumericArray,
} from '@batchwise/protocol';
