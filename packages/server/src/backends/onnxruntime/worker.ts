/**
 * A model instance: one ONNX Runtime session in its own thread, so that a run never
 * blocks the server's event loop. Speaks the messages of protocol.ts.
 */
import { parentPort, workerData } from 'node:worker_threads';
import ort from 'onnxruntime-node';
import type { ModelTensorInfo } from '../../config/model-io.ts';
import { TYPED_ARRAY_OF } from '../../tensor/datatype.ts';
import { serializeBytesElements } from '../../tensor/bytes-codec.ts';
import { datatypeOfOrtType, ORT_TYPE_OF } from './ort-types.ts';
import type { FromWorker, ToWorker, WireTensor, WorkerInit } from './protocol.ts';
import { ownBuffer, transferListOf } from './protocol.ts';
import { ortStringsOf } from './string-tensor.ts';
import { cudaUnavailableMessage, ortSessionOptions, PROVIDER_NAME } from './session-options.ts';

const port = parentPort!;
const init = workerData as WorkerInit;
const send = (message: FromWorker, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);

async function openSession(): Promise<void> {
  let session: ort.InferenceSession;
  let device = init.device;
  let fallbackReason: string | undefined;
  try {
    session = await ort.InferenceSession.create(init.modelPath, ortSessionOptions(init.settings, device, init.deviceId));
  } catch (error) {
    const message = (error as Error).message;
    if (device !== 'cuda') throw error;
    if (!init.allowCpuFallback) throw new Error(cudaUnavailableMessage(message));
    fallbackReason = cudaUnavailableMessage(message);
    device = 'cpu';
    session = await ort.InferenceSession.create(init.modelPath, ortSessionOptions(init.settings, device, 0));
  }
  send({
    type: 'loaded',
    io: { inputs: session.inputMetadata.map(tensorInfo), outputs: session.outputMetadata.map(tensorInfo) },
    executionProvider: PROVIDER_NAME[device],
    ...(fallbackReason !== undefined && { fallbackReason }),
  });
  port.on('message', (message: ToWorker) => {
    if (message.type === 'close') {
      void session.release().finally(() => process.exit(0));
      return;
    }
    run(session, message.id, message.inputs, message.outputNames).catch((error: Error) =>
      send({ type: 'run-failed', id: message.id, message: error.message }),
    );
  });
}

function tensorInfo(meta: ort.InferenceSession.ValueMetadata): ModelTensorInfo {
  if (!meta.isTensor) throw new Error(`'${meta.name}' is not a tensor; only tensor inputs and outputs are supported`);
  const datatype = datatypeOfOrtType(meta.type);
  if (datatype === undefined) throw new Error(`tensor '${meta.name}' has unsupported type ${meta.type}`);
  return { name: meta.name, datatype, dims: meta.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)) };
}

async function run(session: ort.InferenceSession, id: number, inputs: WireTensor[], outputNames: readonly string[]) {
  const t0 = process.hrtime.bigint();
  const feeds: Record<string, ort.Tensor> = {};
  for (const input of inputs) feeds[input.name] = toOrtTensor(input);
  const t1 = process.hrtime.bigint();
  const results = await session.run(feeds, outputNames as string[]);
  const t2 = process.hrtime.bigint();
  const outputs = outputNames.map((name) => fromOrtTensor(name, results[name]!));
  const t3 = process.hrtime.bigint();
  send(
    {
      type: 'result',
      id,
      outputs,
      timings: { computeInputNs: Number(t1 - t0), computeInferNs: Number(t2 - t1), computeOutputNs: Number(t3 - t2) },
    },
    transferListOf(outputs),
  );
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

/** ONNX Runtime names the element type it cannot take by number; 16 is bfloat16, which onnxruntime-node has no tensors for. */
function loadFailure(message: string): string {
  if (!/Unsupported data type: 16\b/.test(message)) return message;
  return `the model has a BF16 (bfloat16) tensor, which ONNX Runtime for Node.js cannot run (${message})`;
}

openSession().catch((error: Error) => send({ type: 'load-failed', message: loadFailure(error.message) }));
