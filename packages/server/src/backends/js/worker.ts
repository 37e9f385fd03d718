/**
 * A JavaScript model instance: the model's own code in its own thread (with a heap limit), so
 * that its exceptions, crashes and endless loops fail its batch and never the server. Speaks
 * the messages of protocol.ts: imports the model file, runs initialize / execute / finalize,
 * and carries the model's inferModel calls to the main thread.
 */
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { isErrorCode, MODEL_CALLER, MODEL_STREAM_CALLER, ModelCallError } from '@batchwise/backend';
import { registerBackendResolution } from './resolve-hook.ts';
import type { FromWorker, ToWorker, WireRequest, WireResponse, WorkerInit } from './protocol.ts';
import { ACK_EVERY, packResponses, packTensors, unpack } from './protocol.ts';
import { ParkedChannelWorker } from './parked-channel.ts';
import { requestKeyOf, RequestStates } from './request-state.ts';
import { toByteTensor, toModelTensor } from './worker-tensors.ts';

const port = parentPort!;
const init = workerData as WorkerInit;
const channel = init.channel && new ParkedChannelWorker(init.channel);
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

// ---- calls from model code to other models (inferModel, inferModelStream) ----
let nextCallId = 0;
/** The batch execute() is running (an instance runs one at a time): its calls join that batch's trace. */
let runningExecuteId: number | undefined;
const calls = new Map<number, { resolve(result: unknown): void; reject(error: Error): void; model: string; done(): void }>();

interface CallRequest {
  model: string;
  version?: string;
  inputs: readonly { name: string; datatype: string; shape: readonly number[]; data: unknown }[];
  outputs?: readonly string[];
  parameters?: Record<string, string | number | boolean>;
  signal?: AbortSignal;
}

const cancelledCall = (model: string) =>
  new ModelCallError(`the call to model '${model}' was cancelled (its signal aborted)`, 'CANCELLED', model);

/** Posts the call to the main thread; returns the key of the request whose signal it was given, if any. */
function postCall(callId: number, request: CallRequest, stream: boolean): number | undefined {
  const { buffer, slices } = packTensors([request.inputs.map((t) => toByteTensor(t))]);
  const requestKey = request.signal && requestKeyOf(request.signal);
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
      ...(stream && { stream: true as const }),
    },
    [buffer],
  );
  return requestKey;
}

(globalThis as Record<symbol, unknown>)[MODEL_CALLER] = (request: CallRequest) =>
  new Promise((resolve, reject) => {
    const { signal } = request;
    if (signal?.aborted) return reject(cancelledCall(request.model));
    const callId = nextCallId++;
    // An aborted signal cancels the call in the server too: a queued call leaves its model's queue. A
    // request's own signal aborts because the main thread ended the request, and it cancels the call then.
    let requestKey: number | undefined;
    const onAbort = () => {
      calls.delete(callId);
      if (requestKey === undefined) send({ type: 'call-cancel', callId });
      reject(cancelledCall(request.model));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    calls.set(callId, { resolve, reject, model: request.model, done: () => signal?.removeEventListener('abort', onAbort) });
    requestKey = postCall(callId, request, false);
  });

function settleCall(message: Extract<ToWorker, { type: 'call-result' | 'call-failed' }>): void {
  const call = calls.get(message.callId);
  if (!call) {
    if (message.type === 'call-failed') streamedCalls.get(message.callId)?.fail(message.code, message.message);
    return;
  }
  calls.delete(message.callId);
  call.done();
  if (message.type === 'call-failed') {
    call.reject(new ModelCallError(message.message, isErrorCode(message.code) ? message.code : 'INTERNAL', call.model));
    return;
  }
  call.resolve({ model: message.model, version: message.version, outputs: message.outputs.map((s) => toModelTensor(message.buffer, s)) });
}

type CallResult = { model: string; version: string; outputs: unknown[] };

/**
 * One inferModelStream call as model code iterates it: the responses the main thread sent and the
 * loop has not taken yet, taken one by one and acknowledged ACK_EVERY at a time (the main thread
 * sends at most MAX_UNSENT_RESPONSES ahead). Leaving the loop early, or the signal aborting, cancels it.
 */
class StreamedCallReader implements AsyncIterator<CallResult> {
  private readonly held: CallResult[] = [];
  private ended = false;
  private failure: Error | undefined;
  private waiting: { resolve(r: IteratorResult<CallResult>): void; reject(e: Error): void } | undefined;
  private taken = 0;
  private readonly onAbort = (): void => this.cancel(cancelledCall(this.request.model));

  constructor(
    private readonly callId: number,
    private readonly request: CallRequest,
  ) {
    streamedCalls.set(callId, this);
    request.signal?.addEventListener('abort', this.onAbort, { once: true });
    postCall(callId, request, true);
  }

  next(): Promise<IteratorResult<CallResult>> {
    const result = this.held.shift();
    if (result) {
      if (++this.taken % ACK_EVERY === 0 && !this.ended) send({ type: 'call-ack', callId: this.callId, count: ACK_EVERY });
      return Promise.resolve({ value: result, done: false });
    }
    if (this.failure) return Promise.reject(this.failure);
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => (this.waiting = { resolve, reject }));
  }

  /** The loop was left early: the call is cancelled in the server. */
  return(): Promise<IteratorResult<CallResult>> {
    if (!this.ended) this.cancel(undefined);
    return Promise.resolve({ value: undefined, done: true });
  }

  response(result: CallResult, final: boolean): void {
    if (this.ended) return;
    this.held.push(result);
    if (final) this.finish();
    this.wakeWith();
  }

  end(): void {
    this.finish();
    this.wakeWith();
  }

  fail(code: string, message: string): void {
    this.failure ??= new ModelCallError(message, isErrorCode(code) ? code : 'INTERNAL', this.request.model);
    this.finish();
    this.wakeWith();
  }

  private cancel(error: Error | undefined): void {
    if (this.ended) return;
    send({ type: 'call-cancel', callId: this.callId });
    this.failure ??= error;
    this.held.length = 0;
    this.finish();
    this.wakeWith();
  }

  private finish(): void {
    this.ended = true;
    streamedCalls.delete(this.callId);
    this.request.signal?.removeEventListener('abort', this.onAbort);
  }

  private wakeWith(): void {
    const waiting = this.waiting;
    if (!waiting) return;
    this.waiting = undefined;
    void this.next().then(waiting.resolve, waiting.reject);
  }
}

const streamedCalls = new Map<number, StreamedCallReader>();

(globalThis as Record<symbol, unknown>)[MODEL_STREAM_CALLER] = (request: CallRequest): AsyncIterable<CallResult> => ({
  [Symbol.asyncIterator]: () => {
    if (request.signal?.aborted) throw cancelledCall(request.model);
    return new StreamedCallReader(nextCallId++, request);
  },
});

function streamedCallResponse(message: Extract<ToWorker, { type: 'call-response' }>): void {
  const outputs = message.outputs.map((s) => toModelTensor(message.buffer, s));
  streamedCalls.get(message.callId)?.response({ model: message.model, version: message.version, outputs }, message.final);
}

// ---- execute ----
/** Every request the model is working on: its signal, and in a decoupled model its response sender. */
const states = new RequestStates(init.args.modelName, init.decoupled, byteOutputs, (key, response, final) => {
  const packed = packTensors([response && 'outputs' in response ? response.outputs : []]);
  const wire: WireResponse | undefined = response && ('outputs' in response ? { outputs: packed.slices[0]! } : response);
  send({ type: 'response', key, buffer: packed.buffer, ...(wire && { response: wire }), final }, [packed.buffer]);
});

type ExecuteAnswer = Extract<FromWorker, { type: 'executed' | 'execute-failed' }>;

/** Batches execute() is running. */
let running = 0;

/** Runs one batch and answers it through `answer`; then parks, if the instance is idle. */
function runBatch(
  model: Model,
  id: number,
  buffer: ArrayBuffer,
  requests: readonly WireRequest[],
  answer: (message: ExecuteAnswer) => void,
): void {
  running++;
  execute(model, id, buffer, requests, answer)
    .catch((error: unknown) => answer({ type: 'execute-failed', id, message: messageOf(error) }))
    .finally(() => {
      running--;
      parkWhileIdle(model);
    });
}

const answerPosted = (message: ExecuteAnswer) =>
  message.type === 'executed' ? send(message, message.buffer.byteLength > 0 ? [message.buffer] : []) : send(message);

/** A batch handed over in shared memory is answered there, or posted when its answer is too large. */
const answerParked = (message: ExecuteAnswer): void => {
  // Only a decoupled model's answer carries its responses as a list, and a decoupled model never parks.
  const fitted =
    message.type === 'execute-failed'
      ? channel!.tryAnswer(message)
      : typeof message.responses === 'string' && channel!.tryAnswer(message as ExecuteAnswer & { responses: string });
  if (fitted) return;
  answerPosted(message);
  channel!.posted();
};

/**
 * Nothing open (no batch running, no call waiting, no decoupled request): park for the next batch
 * (parked-channel.ts). A batch handed over runs here; the park ends with it, or after PARK_MS.
 */
function parkWhileIdle(model: Model): void {
  if (!channel || init.decoupled || running > 0 || calls.size > 0 || streamedCalls.size > 0) return;
  const batch = channel.park(() => {
    const posted = receiveMessageOnPort(port);
    if (posted) onMessage(model, posted.message as ToWorker);
    return posted !== undefined;
  });
  if (batch) runBatch(model, batch.id, batch.buffer, unpack(batch.requests), answerParked);
}

async function execute(
  model: Model,
  id: number,
  buffer: ArrayBuffer,
  requests: readonly WireRequest[],
  answer: (message: ExecuteAnswer) => void,
): Promise<void> {
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
    answer({ type: 'executed', id, buffer: new ArrayBuffer(0), responses: [], timings: timingsOf(t0, t1, t2, t2) });
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
  answer({ type: 'executed', id, buffer: packed.buffer, responses: packResponses(responses), timings: timingsOf(t0, t1, t2, t3) });
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
  port.on('message', (message: ToWorker) => onMessage(model, message));
  send({ type: 'loaded' });
}

function onMessage(model: Model, message: ToWorker): void {
  switch (message.type) {
    case 'execute':
      runBatch(model, message.id, message.buffer, unpack(message.requests), answerPosted);
      return;
    case 'call-result':
    case 'call-failed':
      settleCall(message);
      return;
    case 'call-response':
      streamedCallResponse(message);
      return;
    case 'call-end':
      streamedCalls.get(message.callId)?.end();
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
}

await main();
