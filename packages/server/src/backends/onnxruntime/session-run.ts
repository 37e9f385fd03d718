/**
 * One run of an ONNX Runtime session on tensors in the protocol's shape (each the whole of its
 * buffer), with its timings: what a worker does for each batch, and what an instance on the event
 * loop does in place (event-loop-instance.ts).
 */
import ort from 'onnxruntime-node';
import type { ModelTensorInfo } from '../../config/model-io.ts';
import { TYPED_ARRAY_OF } from '../../tensor/datatype.ts';
import { serializeBytesElements } from '../../tensor/bytes-codec.ts';
import type { ExecutionTimings } from '../backend.ts';
import { datatypeOfOrtType, ORT_TYPE_OF } from './ort-types.ts';
import { ownBuffer, type WireTensor } from './protocol.ts';
import { ortStringsOf } from './string-tensor.ts';
import type { SyncSession } from './native-session.ts';

export async function runSession(
  session: ort.InferenceSession,
  inputs: readonly WireTensor[],
  outputNames: readonly string[],
): Promise<{ outputs: WireTensor[]; timings: ExecutionTimings }> {
  const t0 = process.hrtime.bigint();
  const feeds = feedsOf(inputs);
  const t1 = process.hrtime.bigint();
  const results = await session.run(feeds, outputNames as string[]);
  const t2 = process.hrtime.bigint();
  const outputs = outputNames.map((name) => fromOrtTensor(name, results[name]!));
  return { outputs, timings: timingsOf(t0, t1, t2, process.hrtime.bigint()) };
}

/** The same run on a synchronous session (native-session.ts): done when it returns. */
export function runSessionNow(
  session: SyncSession,
  inputs: readonly WireTensor[],
  outputNames: readonly string[],
): { outputs: WireTensor[]; timings: ExecutionTimings } {
  const t0 = process.hrtime.bigint();
  const feeds = feedsOf(inputs);
  const t1 = process.hrtime.bigint();
  const results = session.run(feeds, outputNames);
  const t2 = process.hrtime.bigint();
  const outputs = outputNames.map((name) => fromOrtTensor(name, results[name]!));
  return { outputs, timings: timingsOf(t0, t1, t2, process.hrtime.bigint()) };
}

function feedsOf(inputs: readonly WireTensor[]): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = {};
  for (const input of inputs) feeds[input.name] = toOrtTensor(input);
  return feeds;
}

function timingsOf(t0: bigint, t1: bigint, t2: bigint, t3: bigint): ExecutionTimings {
  return { computeInputNs: Number(t1 - t0), computeInferNs: Number(t2 - t1), computeOutputNs: Number(t3 - t2) };
}

function toOrtTensor(input: WireTensor): ort.Tensor {
  const shape = input.shape as number[];
  if (input.datatype === 'BYTES') return new ort.Tensor('string', ortStringsOf(new Uint8Array(input.buffer), input.name), shape);
  const ortType = ORT_TYPE_OF[input.datatype];
  if (ortType === undefined)
    throw new Error(`datatype ${input.datatype} of input '${input.name}' is not supported by ONNX Runtime for Node.js`);
  const ArrayType = TYPED_ARRAY_OF[input.datatype];
  const data = new ArrayType(input.buffer, 0, input.buffer.byteLength / ArrayType.BYTES_PER_ELEMENT);
  return new ort.Tensor(ortType as 'float32', data as Float32Array, shape);
}

function fromOrtTensor(name: string, tensor: ort.Tensor): WireTensor {
  const datatype = datatypeOfOrtType(tensor.type);
  if (datatype === undefined) throw new Error(`output '${name}' has unsupported type ${tensor.type}`);
  const shape = [...tensor.dims];
  if (datatype === 'BYTES') {
    return { name, datatype, shape, buffer: ownBuffer(serializeBytesElements(tensor.data as string[])) };
  }
  const data = tensor.data as ArrayBufferView;
  return { name, datatype, shape, buffer: ownBuffer(new Uint8Array(data.buffer, data.byteOffset, data.byteLength)) };
}

/** A session input or output as the server describes it (-1: a dimension of any size). */
export function tensorInfo(meta: ort.InferenceSession.ValueMetadata): ModelTensorInfo {
  if (!meta.isTensor) throw new Error(`'${meta.name}' is not a tensor; only tensor inputs and outputs are supported`);
  const datatype = datatypeOfOrtType(meta.type);
  if (datatype === undefined) throw new Error(`tensor '${meta.name}' has unsupported type ${meta.type}`);
  return { name: meta.name, datatype, dims: meta.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)) };
}
