/**
 * A JavaScript model instance: the model's own code in its own thread (with a heap limit), so
 * that its exceptions, crashes and endless loops fail its batch and never the server. Speaks
 * the messages of protocol.ts: imports the model file, runs initialize / execute / finalize,
 * and carries the model's inferModel calls to the main thread.
 */
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';
import { parentPort, workerData } from 'node:worker_threads';
import { isErrorCode, MODEL_CALLER, ModelCallError } from '@batchwise/backend';
import { registerBackendResolution } from './resolve-hook.ts';
import type { FromWorker, ToWorker, WireRequest, WireResponse, WorkerInit } from './protocol.ts';
import { packResponses, packTensors, unpack } from './protocol.ts';
import { requestKeyOf, RequestStates } from './request-state.ts';
import { toByteTensor, toModelTensor } from './worker-tensors.ts';

const port = parentPort!;
const init = workerData as WorkerInit;
const send = (message: FromWorker, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);

// The model file imports '@batchwise/backend': it must get this server's copy (the module this
// worker uses), wherever the model's folder is (an S3 cache holds no node_modules of ours).
registerBackendResolution(register, import.meta.resolve('@batchwise/backend'));

// A send refused because its request was cancelled or ended, or a call cancelled with it, that model
// code did not await: the request is over, and that is no reason to stop the instance. Anything else
// unhandled still ends the worker (which is replaced), as an exception escaping does.
process.on('unhandledRejection', (reason) => {
  if (RequestStates.isEndOfRequest(reason)) return;
  throw reason;
});

interface Model {
  initialize?(args: unknown): unknown;
  execute(requests: unknown[]): unknown;
  finalize?(): unknown;
}

async function loadModel(): Promise<Model> {
  let module: { default?: unknown };
  try {
    module = (await import(pathToFileURL(init.modelFile).href)) as { default?: unknown };
  } catch (error) {
    throw new Error(`cannot import ${init.modelFile}: ${messageOf(error)}`);
  }
  const exported = module.default;
  if (exported === undefined || exported === null) {
    throw new Error(`${init.modelFile} has no default export (export a class or an object with execute(requests))`);
  }
  let model: Model;
  try {
    model = (typeof exported === 'function' ? new (exported as new () => Model)() : exported) as Model;
  } catch (error) {
    throw new Error(`constructing the default export of ${init.modelFile} failed: ${messageOf(error)}`);
  }
  if (typeof model.execute !== 'function') throw new Error(`the default export of ${init.modelFile} has no execute(requests) method`);
  try {
    await model.initialize?.(init.args);
  } catch (error) {
    throw new Error(`initialize() failed: ${messageOf(error)}`);
  }
  return model;
}

// ---- calls from model code to other models (inferModel) ----
let nextCallId = 0;
/** The batch execute() is running (an instance runs one at a time): its calls join that batch's trace. */
let runningExecuteId: number | undefined;
const calls = new Map<number, { resolve(result: unknown): void; reject(error: Error): void; model: string; done(): void }>();
(globalThis as Record<symbol, unknown>)[MODEL_CALLER] = (request: {
  model: string;
  version?: string;
  inputs: readonly { name: string; datatype: string; shape: readonly number[]; data: unknown }[];
  outputs?: readonly string[];
  parameters?: Record<string, string | number | boolean>;
  signal?: AbortSignal;
}) =>
  new Promise((resolve, reject) => {
    const { signal } = request;
    const cancelled = () =>
      new ModelCallError(`the call to model '${request.model}' was cancelled (its signal aborted)`, 'CANCELLED', request.model);
    if (signal?.aborted) return reject(cancelled());
    const { buffer, slices } = packTensors([request.inputs.map((t) => toByteTensor(t))]);
    const callId = nextCallId++;
    // An aborted signal cancels the call in the server too: a queued call leaves its model's queue. A
    // request's own signal aborts because the main thread ended the request, and it cancels the call then.
    const requestKey = signal && requestKeyOf(signal);
    const onAbort = () => {
      calls.delete(callId);
      if (requestKey === undefined) send({ type: 'call-cancel', callId });
      reject(cancelled());
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    calls.set(callId, { resolve, reject, model: request.model, done: () => signal?.removeEventListener('abort', onAbort) });
    send(
      {
        type: 'call',
        callId,
        ...(runningExecuteId !== undefined && { executeId: runningExecuteId }),
        ...(requestKey !== undefined && { requestKey }),
        buffer,
        request: {
          model: request.model,
          ...(request.version !== undefined && { version: request.version }),
          inputs: slices[0]!,
          ...(request.outputs !== undefined && { outputs: [...request.outputs] }),
          ...(request.parameters !== undefined && { parameters: request.parameters }),
        },
      },
      [buffer],
    );
  });

function settleCall(message: Extract<ToWorker, { type: 'call-result' | 'call-failed' }>): void {
  const call = calls.get(message.callId);
  if (!call) return;
  calls.delete(message.callId);
  call.done();
  if (message.type === 'call-failed') {
    call.reject(new ModelCallError(message.message, isErrorCode(message.code) ? message.code : 'INTERNAL', call.model));
    return;
  }
  call.resolve({ model: message.model, version: message.version, outputs: message.outputs.map((s) => toModelTensor(message.buffer, s)) });
}

// ---- execute ----
/** Every request the model is working on: its signal, and in a decoupled model its response sender. */
const states = new RequestStates(init.args.modelName, init.decoupled, byteOutputs, (key, response, final) => {
  const packed = packTensors([response && 'outputs' in response ? response.outputs : []]);
  const wire: WireResponse | undefined = response && ('outputs' in response ? { outputs: packed.slices[0]! } : response);
  send({ type: 'response', key, buffer: packed.buffer, ...(wire && { response: wire }), final }, [packed.buffer]);
});

async function execute(model: Model, id: number, buffer: ArrayBuffer, requests: readonly WireRequest[]): Promise<void> {
  const t0 = process.hrtime.bigint();
  const modelRequests = requests.map((r) =>
    states.open(r.key, {
      ...(r.id !== undefined && { id: r.id }),
      inputs: Object.fromEntries(r.inputs.map((s) => [s.name, toModelTensor(buffer, s)])),
      requestedOutputs: r.outputNames,
      parameters: r.parameters,
    }),
  );
  const t1 = process.hrtime.bigint();
  runningExecuteId = id;
  let answers: unknown;
  try {
    answers = await model.execute(modelRequests);
  } finally {
    runningExecuteId = undefined;
    // A decoupled request stays open until its final response; the others end with their batch.
    if (!init.decoupled) for (const r of requests) states.close(r.key);
  }
  const t2 = process.hrtime.bigint();
  if (init.decoupled) {
    // Its responses went through the senders: execute's own return value means nothing.
    send({ type: 'executed', id, buffer: new ArrayBuffer(0), responses: [], timings: timingsOf(t0, t1, t2, t2) });
    return;
  }
  if (!Array.isArray(answers)) throw new Error(`execute() returned ${typeof answers}, not an array of responses`);
  if (answers.length !== requests.length) {
    throw new Error(`execute() returned ${answers.length} responses for ${requests.length} requests (one per request, in order)`);
  }
  const outcomes = answers.map(byteOutputs);
  const packed = packTensors(outcomes.map((o) => ('outputs' in o ? o.outputs : [])));
  const responses: WireResponse[] = outcomes.map((o, i) => ('outputs' in o ? { outputs: packed.slices[i]! } : o));
  const t3 = process.hrtime.bigint();
  send(
    {
      type: 'executed',
      id,
      buffer: packed.buffer,
      responses: packResponses(responses),
      timings: timingsOf(t0, t1, t2, t3),
    },
    [packed.buffer],
  );
}

function timingsOf(t0: bigint, t1: bigint, t2: bigint, t3: bigint) {
  return { computeInputNs: Number(t1 - t0), computeInferNs: Number(t2 - t1), computeOutputNs: Number(t3 - t2) };
}

/** One answer of execute() or one response sent: its outputs in the server's byte layout, or its error. */
function byteOutputs(
  answer: unknown,
  index: number,
): { outputs: ReturnType<typeof toByteTensor>[] } | Extract<WireResponse, { error: unknown }> {
  if (answer instanceof Error) return { error: errorOf(answer) };
  if (typeof answer !== 'object' || answer === null)
    return { error: { message: `response ${index} is ${String(answer)}, not { outputs } or { error }` } };
  if ('error' in answer && answer.error !== undefined) return { error: errorOf(answer.error) };
  const outputs = (answer as { outputs?: unknown }).outputs;
  if (!Array.isArray(outputs)) return { error: { message: `response ${index} has no outputs array` } };
  try {
    return { outputs: outputs.map((t) => toByteTensor(t)) };
  } catch (error) {
    return { error: { message: messageOf(error) } };
  }
}

function errorOf(error: unknown): { message: string; code?: string } {
  const code = (error as { code?: unknown } | null)?.code;
  return { message: messageOf(error), ...(isErrorCode(code) && { code }) };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function main(): Promise<void> {
  let model: Model;
  try {
    model = await loadModel();
  } catch (error) {
    send({ type: 'load-failed', message: messageOf(error) });
    return;
  }
  port.on('message', (message: ToWorker) => {
    switch (message.type) {
      case 'execute':
        execute(model, message.id, message.buffer, unpack(message.requests)).catch((error: unknown) =>
          send({ type: 'execute-failed', id: message.id, message: messageOf(error) }),
        );
        return;
      case 'call-result':
      case 'call-failed':
        settleCall(message);
        return;
      case 'end':
        states.end(message.key, message.code, message.message);
        return;
      case 'ack':
        states.ack(message.key, message.count);
        return;
      case 'close':
        void Promise.resolve()
          .then(() => model.finalize?.())
          .catch(() => undefined)
          .finally(() => process.exit(0));
        return;
    }
  });
  send({ type: 'loaded' });
}

await main();
