import type { WireContents } from './wire-contents.ts';

/**
 * Shapes of the protobuf messages as protobufjs decodes them with PROTO_LOADER_OPTIONS (as
 * @grpc/proto-loader would) and takes them back to encode: snake_case fields, 64-bit integers as
 * decimal strings when decoded (numbers are accepted when encoding), bytes as Buffers, oneofs named
 * by their case field. Hand-written for the messages the frontend reads or writes (ModelInfer's
 * responses are written by hand: infer-response-writer.ts).
 */

/** Decimal string as decoded; a number or string is accepted when encoding. */
export type WireLong = string | number;

export interface InferParameterWire {
  parameter_choice?: 'bool_param' | 'int64_param' | 'string_param' | 'double_param' | 'uint64_param';
  bool_param?: boolean;
  int64_param?: WireLong;
  string_param?: string;
  double_param?: number;
  uint64_param?: WireLong;
}

export type ParameterMapWire = Record<string, InferParameterWire>;

/** InferTensorContents as clients encode it (ModelInferRequest's own stay on the wire: WireContents). */
export interface InferTensorContentsWire {
  bool_contents?: boolean[];
  int_contents?: number[];
  int64_contents?: WireLong[];
  uint_contents?: number[];
  uint64_contents?: WireLong[];
  fp32_contents?: number[];
  fp64_contents?: number[];
  bytes_contents?: Uint8Array[];
}

export interface InferInputTensorWire {
  name: string;
  datatype: string;
  shape: WireLong[];
  parameters?: ParameterMapWire;
  /** Found on the wire by decodeInferMessage and decoded by decodeInferRequest. */
  contents?: WireContents | null;
}

export interface InferRequestedOutputTensorWire {
  name: string;
  parameters?: ParameterMapWire;
}

export interface ModelInferRequestWire {
  model_name: string;
  model_version: string;
  id: string;
  parameters?: ParameterMapWire;
  inputs: InferInputTensorWire[];
  outputs?: InferRequestedOutputTensorWire[];
  raw_input_contents?: Uint8Array[];
}

export interface StatisticDurationWire {
  count: WireLong;
  ns: WireLong;
}

export interface ModelStatisticsWire {
  name: string;
  version: string;
  last_inference: WireLong;
  inference_count: WireLong;
  execution_count: WireLong;
  inference_stats: Record<string, StatisticDurationWire>;
  batch_stats: {
    batch_size: WireLong;
    compute_input: StatisticDurationWire;
    compute_infer: StatisticDurationWire;
    compute_output: StatisticDurationWire;
  }[];
  memory_usage: { type: string; id: WireLong; byte_size: WireLong }[];
}

export interface ModelRepositoryParameterWire {
  parameter_choice?: 'bool_param' | 'int64_param' | 'string_param' | 'bytes_param';
  bool_param?: boolean;
  int64_param?: WireLong;
  string_param?: string;
  bytes_param?: Uint8Array;
}

export interface LogSettingValueWire {
  parameter_choice?: 'bool_param' | 'uint32_param' | 'string_param';
  bool_param?: boolean;
  uint32_param?: number;
  string_param?: string;
}
