/**
 * A model instance: one ONNX Runtime session in its own thread, so that a run never
 * blocks the server's event loop. Speaks the messages of protocol.ts.
 */
import { parentPort, workerData } from 'node:worker_threads';
import ort from 'onnxruntime-node';
import type { FromWorker, ToWorker, WireTensor, WorkerInit } from './protocol.ts';
import { transferListOf } from './protocol.ts';
import { runSession, tensorInfo } from './session-run.ts';
import { gpuUnavailableMessage } from './provider-failure.ts';
import { failedProvider, ortSessionOptions, providerNames } from './session-options.ts';

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
    if (device !== 'gpu') throw error;
    const unavailable = gpuUnavailableMessage(failedProvider(init.settings, message), message);
    if (!init.allowCpuFallback) throw new Error(unavailable);
    fallbackReason = unavailable;
    device = 'cpu';
    session = await ort.InferenceSession.create(init.modelPath, ortSessionOptions(init.settings, device, 0));
  }
  send({
    type: 'loaded',
    io: { inputs: session.inputMetadata.map(tensorInfo), outputs: session.outputMetadata.map(tensorInfo) },
    executionProvider: providerNames(init.settings, device),
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

async function run(session: ort.InferenceSession, id: number, inputs: WireTensor[], outputNames: readonly string[]) {
  const { outputs, timings } = await runSession(session, inputs, outputNames);
  send({ type: 'result', id, outputs, timings }, transferListOf(outputs));
}

/** ONNX Runtime names the element type it cannot take by number; 16 is bfloat16, which onnxruntime-node has no tensors for. */
function loadFailure(message: string): string {
  if (!/Unsupported data type: 16\b/.test(message)) return message;
  return `the model has a BF16 (bfloat16) tensor, which ONNX Runtime for Node.js cannot run (${message})`;
}

openSession().catch((error: Error) => send({ type: 'load-failed', message: loadFailure(error.message) }));
