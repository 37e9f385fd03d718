import type { Worker } from 'node:worker_threads';
import { modelConfigToJson } from '../../config/to-json.ts';
import type { ModelConfig } from '../../config/model-config.ts';
import type { ModelIO, ModelTensorInfo } from '../../config/model-io.ts';
import { modelFacingDims } from '../../config/shape-rules.ts';
import { isDecoupled } from '../../config/transaction-policy.ts';
import { Errors, InferenceServerError, toInferenceServerError } from '../../errors/errors.ts';
import { offAbort, onAbort } from '../../protocol/abort-listeners.ts';
import type { InferenceCall, InferenceRequest, InferenceStreamCall } from '../../protocol/types.ts';
import { CONFIG_TYPE_TO_DATATYPE } from '../../tensor/datatype.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type {
  Backend,
  ExecutionResult,
  InstanceOptions,
  InstanceRequest,
  LoadedInstance,
  ModelInstance,
  RequestOutcome,
  RequestsResult,
  StreamedResponse,
} from '../backend.ts';
import { executeAsOneRequest, PendingRuns } from '../pending-runs.ts';
import { spawnWorkerThread, SupervisedWorker, waitUntilLoaded } from '../worker-supervision.ts';
import { DEFAULT_FINAL_RESPONSE_TIMEOUT_MS, FINAL_RESPONSE_TIMEOUT_PARAMETER, LiveRequests } from './live-requests.ts';
import { OutputRules } from './output-check.ts';
import { ParkedChannelHost, parkedChannelMemory } from './parked-channel.ts';
import { StreamedCall } from './streamed-call.ts';
import {
  packRequests,
  packTensors,
  sliceBytes,
  unpack,
  type FromWorker,
  type ToWorker,
  type WireRequest,
  type WireResponse,
  type WorkerInit,
} from './protocol.ts';

/** Per-model parameter: milliseconds an `execute` may take before its batch fails and its worker is replaced. */
export const EXECUTE_TIMEOUT_PARAMETER = 'batchwise_execute_timeout_ms';
export const DEFAULT_EXECUTE_TIMEOUT_MS = 30_000;

export interface JsBackendOptions {
  /**
   * Old-generation heap limit of each worker thread, bytes: model code that outgrows it kills
   * its own worker (ERR_WORKER_OUT_OF_MEMORY), which fails the batch and is replaced.
   * @default Node's default heap limit
   */
  readonly workerHeapLimitBytes?: number;
  /**
   * Whether the server holds no request but the one being run: then a short batch handed to a parked
   * worker is awaited by spinning (parked-channel.ts), which spares the main thread's wake-up.
   * @default never
   */
  readonly alone?: () => boolean;
}

export interface JsBackend extends Backend {
  /**
   * A call that may bring a batch is arriving, its request not read yet: every parked worker is woken now, so that
   * its wake-up overlaps the reading (ParkedChannelHost.headsUp). Workers not parked are left alone.
   */
  headsUp(): void;
}

/** The JavaScript backend (`backend: "js"`): each instance runs the model's own code in a worker thread. */
export function createJsBackend(backendOptions: JsBackendOptions = {}): JsBackend {
  /** The parked channels of this backend's live workers. */
  const hosts = new Set<ParkedChannelHost>();
  return {
    name: 'js',
    runsModelCode: true,
    configDeclaresTensors: true,
    createInstance: (options) => createInstance(options, backendOptions, hosts),
    headsUp() {
      for (const host of hosts) host.headsUp();
    },
  };
}

/** Each worker's side of its parked channel, on the main thread. */
const parkedChannels = new WeakMap<Worker, ParkedChannelHost>();

function spawnWorker(init: WorkerInit, options: JsBackendOptions, hosts: Set<ParkedChannelHost>): Worker {
  const channel = parkedChannelMemory();
  const worker = spawnWorkerThread(new URL('./', import.meta.url), { ...init, channel }, options.workerHeapLimitBytes);
  const host = new ParkedChannelHost(channel);
  parkedChannels.set(worker, host);
  hosts.add(host);
  worker.once('exit', () => hosts.delete(host));
  return worker;
}

/** Posts to a worker, ringing it back to its loop if it is parked. */
function postToWorker(worker: Worker, message: ToWorker, transfer: ArrayBuffer[] = []): void {
  worker.postMessage(message, transfer);
  parkedChannels.get(worker)?.unpark();
}

async function createInstance(
  options: InstanceOptions,
  backendOptions: JsBackendOptions,
  hosts: Set<ParkedChannelHost>,
): Promise<LoadedInstance> {
  const context = options.model;
  if (!context) throw Errors.internal(`model '${options.modelName}': the js backend needs the model's config and folders`);
  const { config } = context;
  const timeoutMs = positiveMs(config, EXECUTE_TIMEOUT_PARAMETER, DEFAULT_EXECUTE_TIMEOUT_MS);
  const decoupled = isDecoupled(config);
  const finalResponseTimeoutMs = positiveMs(config, FINAL_RESPONSE_TIMEOUT_PARAMETER, DEFAULT_FINAL_RESPONSE_TIMEOUT_MS);
  const init: WorkerInit = {
    modelFile: options.modelPath,
    decoupled,
    args: {
      config: modelConfigToJson(config) as Record<string, unknown>,
      modelName: options.modelName,
      modelVersion: context.version,
      instanceName: context.instanceName,
      instanceKind: context.kind,
      deviceId: options.deviceId,
      modelDir: context.modelDir,
      versionDir: context.versionDir,
    },
  };
  const spawn = () => spawnWorker(init, backendOptions, hosts);
  let worker: Worker;
  try {
    worker = await waitUntilLoaded<object>(spawn());
  } catch (error) {
    throw Errors.invalidArg(`model '${options.modelName}' (backend js): ${(error as Error).message}`);
  }
  const instance = new JsInstance(worker, spawn, options.modelName, config, {
    timeoutMs,
    decoupled,
    finalResponseTimeoutMs,
    callModel: options.callModel,
    streamModel: options.streamModel,
    heapLimitBytes: backendOptions.workerHeapLimitBytes,
    alone: backendOptions.alone,
  });
  return { instance, io: ioOfConfig(config), executionProvider: 'js' };
}

/** A model parameter of whole milliseconds, or its default when absent. */
export function positiveMs(config: ModelConfig, parameter: string, byDefault: number): number {
  const text = config.parameters?.[parameter]?.string_value;
  if (text === undefined) return byDefault;
  const ms = Number(text);
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    throw Errors.invalidArg(`model '${config.name}': parameter ${parameter} must be a positive integer of milliseconds, got '${text}'`);
  }
  return ms;
}

/** A JavaScript model declares its tensors in its config: they are what the "model" has, batch dimension included. */
export function ioOfConfig(config: ModelConfig): ModelIO {
  const batch = config.max_batch_size > 0 ? [-1] : [];
  const info = (t: ModelConfig['input'][number]): ModelTensorInfo => ({
    name: t.name,
    datatype: CONFIG_TYPE_TO_DATATYPE[t.data_type]!,
    dims: [...batch, ...modelFacingDims(t)],
  });
  // An input the config calls optional may be left out: the model's code sees it absent.
  return { inputs: config.input.map((t) => ({ ...info(t), ...(t.optional && { optional: true }) })), outputs: config.output.map(info) };
}

interface JsInstanceOptions {
  /** batchwise_execute_timeout_ms. */
  readonly timeoutMs: number;
  /** model_transaction_policy { decoupled: true }: requests answer through their sinks. */
  readonly decoupled: boolean;
  /** batchwise_final_response_timeout_ms (decoupled models). */
  readonly finalResponseTimeoutMs: number;
  readonly callModel: InferenceCall | undefined;
  readonly streamModel: InferenceStreamCall | undefined;
  readonly heapLimitBytes: number | undefined;
  readonly alone: (() => boolean) | undefined;
}

/**
 * Main-thread handle of one worker running one JavaScript model instance. Sends each batch's
 * requests with their own inputs, checks every answer against the config, serves the model's
 * calls to other models, and replaces a worker that dies (an exception escaping, process.exit,
 * its heap limit) or that overruns the execute timeout; repeated deaths leave it failed. A
 * cancelled request is ended in the worker; a decoupled model's responses go to each request's
 * sink as the model sends them, after its execute returned too (LiveRequests).
 */
class JsInstance implements ModelInstance {
  private nextId = 0;
  private nextKey = 0;
  private readonly pending: PendingRuns<Worker>;
  /** In-server calls model code made and has not had answered, by call id: cancelled when the model cancels them. */
  private readonly calls = new Map<number, AbortController>();
  /** Streamed calls being served, by call id: the worker acknowledges their responses. */
  private readonly streamedCalls = new Map<number, StreamedCall>();
  private readonly worker: SupervisedWorker<FromWorker>;
  private readonly rules: OutputRules;
  private readonly live: LiveRequests;
  private readonly timeoutMs: number;
  readonly heapLimitBytes: number | undefined;

  constructor(
    first: Worker,
    spawn: () => Worker,
    private readonly modelName: string,
    private readonly config: ModelConfig,
    private readonly options: JsInstanceOptions,
  ) {
    this.timeoutMs = options.timeoutMs;
    this.heapLimitBytes = options.heapLimitBytes;
    this.rules = new OutputRules(modelName, config);
    this.live = new LiveRequests(modelName, options.finalResponseTimeoutMs, (worker, message) => {
      if (this.worker.isCurrent(worker)) postToWorker(worker, message);
    });
    this.pending = new PendingRuns(this.live, options.decoupled);
    this.worker = new SupervisedWorker(first, {
      spawn,
      instance: `model instance of '${modelName}'`,
      onMessage: (worker, message) => this.onMessage(worker, message),
      onDeath: (how, worker) =>
        this.failWorker(worker, Errors.internal(`model '${modelName}': its instance crashed (${how}); the batch it was running failed`)),
      error: Errors.unavailable,
      // finalize() gets as long as an execute may take.
      closeGraceMs: Math.min(options.timeoutMs, 30_000),
    });
  }

  /** Set by the owner: called once if the instance gives up after repeated crashes. */
  set onFatal(handler: ((error: Error) => void) | undefined) {
    this.worker.onFatal = handler;
  }

  get onFatal(): ((error: Error) => void) | undefined {
    return this.worker.onFatal;
  }

  /** One assembled batch as one request (warmup samples); a decoupled model's last response is its answer. */
  execute(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult> {
    return executeAsOneRequest((requests) => this.executeRequests(requests), this.options.decoupled, inputs, outputNames);
  }

  async executeRequests(requests: readonly InstanceRequest[]): Promise<RequestsResult> {
    const worker = await this.worker.ready();
    const id = this.nextId++;
    const { buffer, slices } = packTensors(requests.map((r) => r.inputs));
    const keys: number[] = [];
    const wire: WireRequest[] = [];
    for (let i = 0; i < requests.length; i++) {
      const r = requests[i]!;
      const key = this.nextKey++;
      keys.push(key);
      wire.push(
        r.id === undefined
          ? { key, inputs: slices[i]!, outputNames: r.outputNames, parameters: r.parameters }
          : { key, id: r.id, inputs: slices[i]!, outputNames: r.outputNames, parameters: r.parameters },
      );
    }
    return new Promise<RequestsResult>((resolve, reject) => {
      const timer = setTimeout(() => this.onTimeout(worker, id), this.timeoutMs);
      const ended = requests.map((r, i) => this.live.add(keys[i]!, r, worker));
      this.pending.add(id, { requests, keys, ended, timer, resolve, reject });
      const requestsText = packRequests(wire);
      const parked =
        typeof requestsText === 'string'
          ? parkedChannels.get(worker)?.tryExecute({ id, buffer, requests: requestsText }, this.options.alone?.() === true)
          : undefined;
      if (parked) void parked.then((answer) => answer.type !== 'posted' && this.worker.isCurrent(worker) && this.onMessage(worker, answer));
      else postToWorker(worker, { type: 'execute', id, buffer, requests: requestsText }, [buffer]);
      // Cancelled before it reached the worker: it starts ended.
      requests.forEach((r, i) => r.signal?.aborted && this.live.end(keys[i]!, Errors.cancelled()));
    });
  }

  async close(): Promise<void> {
    await this.worker.close();
    const error = Errors.unavailable(`model instance of '${this.modelName}' closed before answering`);
    this.pending.failAll(error);
    this.live.endAllOf(undefined, error);
    this.cancelStreamedCalls();
  }

  /** The worker is gone: its streamed calls are cancelled (one waiting for acknowledgements would wait forever). */
  private cancelStreamedCalls(): void {
    for (const callId of this.streamedCalls.keys()) this.calls.get(callId)?.abort();
  }

  private onMessage(worker: Worker, message: FromWorker): void {
    switch (message.type) {
      case 'call':
        void this.serveCall(worker, message);
        return;
      case 'call-cancel':
        this.calls.get(message.callId)?.abort();
        return;
      case 'call-ack':
        this.streamedCalls.get(message.callId)?.acknowledge(message.count);
        return;
      case 'response':
        this.onResponse(message);
        return;
      case 'executed':
      case 'execute-failed':
        break;
      default:
        return;
    }
    const run = this.pending.take(message.id);
    if (!run) return;
    if (message.type === 'execute-failed') {
      this.pending.fail(run, Errors.internal(`model '${this.modelName}': execute() failed: ${message.message}`));
      return;
    }
    if (this.pending.returned(run, message.timings)) return;
    run.resolve({
      responses: unpack(message.responses).map((response, i) => this.outcome(message.buffer, response, run.requests[i]!)),
      timings: message.timings,
    });
  }

  /** A response a decoupled model sent: checked against the config, then to its request's sink. */
  private onResponse(message: Extract<FromWorker, { type: 'response' }>): void {
    const request = this.live.requestOf(message.key);
    if (!request) return;
    const response = message.response && this.outcome(message.buffer, message.response, request);
    this.live.response(message.key, response as StreamedResponse | undefined, message.final);
  }

  private outcome(buffer: ArrayBuffer, response: WireResponse, request: InstanceRequest): RequestOutcome {
    if ('error' in response) {
      const code = response.error.code ?? 'INTERNAL';
      return {
        error: new InferenceServerError(code as InferenceServerError['code'], `model '${this.modelName}': ${response.error.message}`),
      };
    }
    const outputs = response.outputs.map((s) => ({ name: s.name, datatype: s.datatype, shape: s.shape, data: sliceBytes(buffer, s) }));
    const batchSize = this.config.max_batch_size > 0 ? (request.inputs[0]?.shape[0] ?? 1) : 1;
    try {
      return { outputs: this.rules.select(outputs, request.outputNames, batchSize) };
    } catch (error) {
      return { error: toInferenceServerError(error) };
    }
  }

  /** Runs the model's inferModel (or inferModelStream) call through the server and answers the worker that asked. */
  private async serveCall(worker: Worker, message: Extract<FromWorker, { type: 'call' }>): Promise<void> {
    const call = message.request;
    const { callId } = message;
    // A worker replaced meanwhile is gone: its call has no one to answer. A cancelled call's answer is dropped there.
    const post = (answer: ToWorker, transfer: ArrayBuffer[] = []): void => {
      if (this.worker.isCurrent(worker)) postToWorker(worker, answer, transfer);
    };
    // A call made with its request's signal ends with that request (one signal for all its calls); another, by
    // call-cancel. A streamed call has a controller of its own either way: its first error response cancels it.
    let signal: AbortSignal | undefined;
    let own: AbortController | undefined;
    if (message.requestKey === undefined || message.stream) {
      own = new AbortController();
      this.calls.set(callId, own);
    }
    if (message.requestKey === undefined) signal = own!.signal;
    else signal = this.live.callSignal(message.requestKey);
    const follow = own && signal !== own.signal ? { handleEvent: () => own.abort() } : undefined;
    try {
      const run = message.stream ? this.options.streamModel : this.callModel;
      if (!run) throw Errors.unavailable('calls to other models are not available in this server');
      if (!signal || signal.aborted) throw Errors.cancelled();
      if (follow) onAbort(signal, follow);
      const request: InferenceRequest = {
        modelName: call.model,
        ...(call.version !== undefined && { modelVersion: call.version }),
        inputs: call.inputs.map((s) => ({ name: s.name, datatype: s.datatype, shape: s.shape, data: sliceBytes(message.buffer, s) })),
        ...(call.outputs !== undefined && { outputs: call.outputs.map((name) => ({ name, parameters: {} })) }),
        parameters: call.parameters ?? {},
        ...this.pending.callerOf(message.executeId),
      };
      if (message.stream) {
        const streamed = new StreamedCall(callId, post);
        this.streamedCalls.set(callId, streamed);
        await streamed.serve(this.options.streamModel!, request, own!);
        return;
      }
      const response = await this.callModel!(request, { signal });
      const { buffer, slices } = packTensors([response.outputs]);
      post({ type: 'call-result', callId, model: response.modelName, version: response.modelVersion, buffer, outputs: slices[0]! }, [
        buffer,
      ]);
    } catch (error) {
      const e = toInferenceServerError(error);
      post({ type: 'call-failed', callId, code: e.code, message: e.message });
    } finally {
      this.calls.delete(callId);
      this.streamedCalls.delete(callId);
      if (follow && signal) offAbort(signal, follow);
    }
  }

  private get callModel(): InferenceCall | undefined {
    return this.options.callModel;
  }

  /** An execute that overran: its batch fails, and the worker is stopped (and, on its exit, replaced). */
  private onTimeout(worker: Worker, id: number): void {
    if (!this.worker.isCurrent(worker)) return;
    const run = this.pending.take(id);
    if (!run) return;
    const error = Errors.internal(
      `model '${this.modelName}': execute() did not finish within ${this.timeoutMs} ms (parameter ${EXECUTE_TIMEOUT_PARAMETER}); ` +
        'its instance was stopped and is replaced',
    );
    this.pending.fail(run, error);
    this.live.endAllOf(worker, error);
    this.cancelStreamedCalls();
    void worker.terminate();
    // Replaced now, not when the thread has exited: a request arriving meanwhile waits for the new worker.
    this.worker.died(worker, `stopped after its execute timeout of ${this.timeoutMs} ms`);
  }

  /** The worker died: what it ran fails (open decoupled requests included). */
  private failWorker(worker: Worker, error: Error): void {
    this.pending.failAll(error);
    this.live.endAllOf(worker, error);
    this.cancelStreamedCalls();
  }
}
