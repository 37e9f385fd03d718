import { ELEMENT_BYTE_SIZE, type DataType } from '../tensor/datatype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { elementCount } from '../tensor/shape.ts';
import { bytesTensorContent, stringConversionBytes } from './element-cost.ts';

/**
 * Longest JSON text of one element and its separator, by datatype: what a reply written as
 * JSON costs per element. FP32/FP64 are written as shortest round-trip doubles (up to
 * "-1.2345678901234567e-308,"); BYTES elements as their string plus quotes and escapes,
 * estimated from their bytes instead (see jsonTextBytes).
 */
export const JSON_TEXT_BYTES_PER_ELEMENT: Readonly<Record<Exclude<DataType, 'BYTES'>, number>> = {
  BOOL: 6,
  UINT8: 4,
  INT8: 5,
  UINT16: 6,
  INT16: 7,
  UINT32: 11,
  INT32: 12,
  UINT64: 21,
  INT64: 21,
  FP16: 25,
  BF16: 25,
  FP32: 25,
  FP64: 25,
};
/** A JSON reply is held twice while it is sent: as the text built and as the reply buffer. */
export const JSON_REPLY_COPIES = 2;
/** A BYTES element written as JSON: its bytes, up to 6 per byte when escaped (\u00XX), plus quotes. */
const JSON_BYTES_PER_BYTE = 6;

/** What the charge needs to know of a model version, decided at load time. */
export interface ChargedModel {
  readonly maxBatchSize: number;
  readonly inputs: readonly { readonly datatype: DataType; readonly dims: readonly number[] }[];
  readonly outputs: readonly { readonly name: string; readonly datatype: DataType; readonly dims: readonly number[] }[];
}

/** Whether an output will be written as JSON text (HTTP replies without binary_data); default: never. */
export type SentAsJson = (output: { readonly name: string; readonly datatype: DataType }) => boolean;

interface OutputPlan {
  readonly name: string;
  readonly datatype: DataType;
  /** Elements per batch item, or undefined when a dim is variable. */
  readonly itemElements: number | undefined;
}

interface ModelPlan {
  readonly outputs: ReadonlyMap<string, OutputPlan>;
  /** Charge beyond the body per byte of body, for replies sent binary and as JSON (see advanceChargeBytes). */
  readonly advancePerBodyByte: { readonly binary: number; readonly json: number };
}

/** A BYTES element is taken as its 4-byte length and 32 bytes of content. */
const BYTES_ELEMENT_ESTIMATE = 36;

const plans = new WeakMap<ChargedModel, ModelPlan>();

function planOf(model: ChargedModel): ModelPlan {
  let plan = plans.get(model);
  if (plan) return plan;
  const outputs = new Map<string, OutputPlan>(
    model.outputs.map((o) => [o.name, { name: o.name, datatype: o.datatype, itemElements: fixedElements(o.dims) }]),
  );
  // One batch item with every variable dim at 1.
  let itemBytes = 0;
  let largestItem = 0;
  for (const input of model.inputs) {
    const elements = input.dims.reduce((a, d) => a * Math.max(1, d), 1);
    itemBytes += elements * (ELEMENT_BYTE_SIZE[input.datatype] || BYTES_ELEMENT_ESTIMATE);
    largestItem = Math.max(largestItem, elements);
  }
  // Strings are left out of the advance (per body byte it would err far high for long ones); infer() charges them exactly.
  const perItem = (json: boolean) =>
    chargeBeyondReceived(outputs, itemBytes, largestItem, 1, [...outputs.keys()], () => json, false) / Math.max(1, itemBytes);
  plan = { outputs, advancePerBodyByte: { binary: perItem(false), json: perItem(true) } };
  plans.set(model, plan);
  return plan;
}

function fixedElements(dims: readonly number[]): number | undefined {
  return dims.every((d) => d >= 0) ? dims.reduce((a, d) => a * d, 1) : undefined;
}

/**
 * Bytes a validated request holds beyond what it was received in, estimated from the model
 * config and the request's shapes (nothing is measured):
 * - its inputs once more, as the batch buffer (or the buffer handed to the worker thread);
 * - each output as the model returns it, and again as the reply carries it: its bytes when
 *   sent binary (gRPC, HTTP binary_data), or JSON text at JSON_TEXT_BYTES_PER_ELEMENT per
 *   element, JSON_REPLY_COPIES times.
 * An output with a variable dim is taken to have as many elements per batch item as the
 * largest input (identity and elementwise models echo their input's shape); a BYTES output
 * is taken to be as large as the request's inputs, at BYTES_ELEMENT_ESTIMATE per element at least.
 * - BYTES inputs and outputs once more as the strings ONNX Runtime takes and gives in the worker
 *   (element-cost.ts), an object per element.
 */
export function requestChargeBytes(
  model: ChargedModel,
  request: { readonly inputs: readonly Tensor[]; readonly batchSize: number; readonly outputNames: readonly string[] },
  sentAsJson: SentAsJson | undefined,
): number {
  const batch = model.maxBatchSize > 0 ? Math.max(1, request.batchSize) : 1;
  let inputBytes = 0;
  let largestInputItem = 0;
  let strings = 0;
  for (const input of request.inputs) {
    const elements = elementCount(input.shape);
    inputBytes += input.data.byteLength;
    largestInputItem = Math.max(largestInputItem, elements / batch);
    if (input.datatype === 'BYTES') strings += stringConversionBytes(elements, bytesTensorContent(elements, input.data.byteLength));
  }
  return chargeBeyondReceived(planOf(model).outputs, inputBytes, largestInputItem, batch, request.outputNames, sentAsJson, true) + strings;
}

/**
 * The charge of a request whose body is known only by its length, before it is read: the body
 * is taken as its inputs' bytes (a binary body is; a JSON body is larger, so this errs high)
 * and the rest scaled from one batch item of the model's config, with outputs sent as JSON or
 * not as the body's format suggests. infer() charges the exact estimate later, spending this
 * advance first, so a request is refused before its body is read rather than after.
 */
export function advanceChargeBytes(model: ChargedModel, bodyBytes: number, repliesAsJson: boolean): number {
  const perByte = planOf(model).advancePerBodyByte;
  return Math.ceil(bodyBytes * (repliesAsJson ? perByte.json : perByte.binary));
}

function chargeBeyondReceived(
  outputs: ReadonlyMap<string, OutputPlan>,
  inputBytes: number,
  largestInputItem: number,
  batch: number,
  outputNames: readonly string[],
  sentAsJson: SentAsJson | undefined,
  convertsStrings: boolean,
): number {
  let charge = inputBytes;
  for (const name of outputNames) {
    const output = outputs.get(name);
    if (!output) continue;
    const elements = (output.itemElements ?? largestInputItem) * batch;
    const raw =
      output.datatype === 'BYTES' ? Math.max(inputBytes, elements * BYTES_ELEMENT_ESTIMATE) : elements * ELEMENT_BYTE_SIZE[output.datatype];
    charge += raw + (sentAsJson?.(output) ? jsonTextBytes(output.datatype, elements, raw) * JSON_REPLY_COPIES : raw);
    if (convertsStrings && output.datatype === 'BYTES') charge += stringConversionBytes(elements, bytesTensorContent(elements, raw));
  }
  return Math.ceil(charge);
}

function jsonTextBytes(datatype: DataType, elements: number, rawBytes: number): number {
  if (datatype === 'BYTES') return rawBytes * JSON_BYTES_PER_BYTE;
  return elements * JSON_TEXT_BYTES_PER_ELEMENT[datatype];
}
