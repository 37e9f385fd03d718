import type { Worker } from 'node:worker_threads';
import { modelConfigToJson } from '../../config/to-json.ts';
import type { ModelConfig } from '../../config/model-config.ts';
import type { ModelIO, ModelTensorInfo } from '../../config/model-io.ts';
import { modelFacingDims } from '../../config/shape-rules.ts';
import { Errors, InferenceServerError, toInferenceServerError } from '../../errors/errors.ts';
import type { InferenceCall, InferenceRequest } from '../../protocol/types.ts';
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
} from '../backend.ts';
import { spawnWorkerThread, SupervisedWorker, waitUntilLoaded } from '../worker-supervision.ts';
import { OutputRules } from './output-check.ts';
import { packTensors, sliceBytes, type FromWorker, type ToWorker, type WireResponse, type WorkerInit } from './protocol.ts';

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
}

/** The JavaScript backend (`backend: "js"`): each instance runs the model's own code in a worker thread. */
export function createJsBackend(backendOptions: JsBackendOptions = {}): Backend {
  return { name: 'js', runsModelCode: true, createInstance: (options) => createInstance(options, backendOptions) };
}

function spawnWorker(init: WorkerInit, options: JsBackendOptions): Worker {
  return spawnWorkerThread(new URL('./', import.meta.url), init, options.workerHeapLimitBytes);
}

async function createInstance(options: InstanceOptions, backendOptions: JsBackendOptions): Promise<LoadedInstance> {
  const context = options.model;
  if (!context) throw Errors.internal(`model '${options.modelName}': the js backend needs the model's config and folders`);
  const { config } = context;
  const timeoutMs = executeTimeoutMs(config);
  const init: WorkerInit = {
    modelFile: options.modelPath,
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
  const spawn = () => spawnWorker(init, backendOptions);
  let worker: Worker;
  try {
    worker = await waitUntilLoaded<object>(spawn());
  } catch (error) {
    throw Errors.invalidArg(`model '${options.modelName}' (backend js): ${(error as Error).message}`);
  }
  const instance = new JsInstance(
    worker,
    spawn,
    options.modelName,
    config,
    timeoutMs,
    options.callModel,
    backendOptions.workerHeapLimitBytes,
  );
  return { instance, io: ioOfConfig(config), executionProvider: 'js' };
}

function executeTimeoutMs(config: ModelConfig): number {
  const text = config.parameters?.[EXECUTE_TIMEOUT_PARAMETER]?.string_value;
  if (text === undefined) return DEFAULT_EXECUTE_TIMEOUT_MS;
  const ms = Number(text);
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    throw Errors.invalidArg(
      `model '${config.name}': parameter ${EXECUTE_TIMEOUT_PARAMETER} must be a positive integer of milliseconds, got '${text}'`,
    );
  }
  return ms;
}

/** A JavaScript model declares its tensors in its config: they are what the "model" has, batch dimension included. */
function ioOfConfig(config: ModelConfig): ModelIO {
  const batch = config.max_batch_size > 0 ? [-1] : [];
  const info = (t: ModelConfig['input'][number]): ModelTensorInfo => ({
    name: t.name,
    datatype: CONFIG_TYPE_TO_DATATYPE[t.data_type]!,
    dims: [...batch, ...modelFacingDims(t)],
  });
  return { inputs: config.input.map(info), outputs: config.output.map(info) };
}

interface PendingRun {
  readonly requests: readonly InstanceRequest[];
  readonly timer: NodeJS.Timeout;
  resolve(result: RequestsResult): void;
  reject(error: Error): void;
}

/**
 * Main-thread handle of one worker running one JavaScript model instance. Sends each batch's
 * requests with their own inputs, checks every answer against the config, serves the model's
 * calls to other models, and replaces a worker that dies (an exception escaping, process.exit,
 * its heap limit) or that overruns the execute timeout; repeated deaths leave it failed.
 */
class JsInstance implements ModelInstance {
  private nextId = 0;
  private readonly pending = new Map<number, PendingRun>();
  private readonly worker: SupervisedWorker<FromWorker>;
  private readonly rules: OutputRules;

  constructor(
    first: Worker,
    spawn: () => Worker,
    private readonly modelName: string,
    private readonly config: ModelConfig,
    private readonly timeoutMs: number,
    private readonly callModel: InferenceCall | undefined,
    readonly heapLimitBytes: number | undefined,
  ) {
    this.rules = new OutputRules(modelName, config);
    this.worker = new SupervisedWorker(first, {
      spawn,
      instance: `model instance of '${modelName}'`,
      onMessage: (worker, message) => this.onMessage(worker, message),
      onDeath: (how) =>
        this.failPending(Errors.internal(`model '${modelName}': its instance crashed (${how}); the batch it was running failed`)),
      error: Errors.unavailable,
      // finalize() gets as long as an execute may take.
      closeGraceMs: Math.min(timeoutMs, 30_000),
    });
  }

  /** Set by the owner: called once if the instance gives up after repeated crashes. */
  set onFatal(handler: ((error: Error) => void) | undefined) {
    this.worker.onFatal = handler;
  }

  get onFatal(): ((error: Error) => void) | undefined {
    return this.worker.onFatal;
  }

  /** One assembled batch as one request (warmup samples). */
  async execute(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult> {
    const { responses, timings } = await this.executeRequests([{ inputs, outputNames, parameters: {} }]);
    const outcome = responses[0]!;
    if ('error' in outcome) throw outcome.error;
    return { outputs: outcome.outputs, timings };
  }

  async executeRequests(requests: readonly InstanceRequest[]): Promise<RequestsResult> {
    const worker = await this.worker.ready();
    const id = this.nextId++;
    const { buffer, slices } = packTensors(requests.map((r) => r.inputs));
    const wire = requests.map((r, i) => ({
      ...(r.id !== undefined && { id: r.id }),
      inputs: slices[i]!,
      outputNames: r.outputNames,
      parameters: r.parameters,
    }));
    return new Promise<RequestsResult>((resolve, reject) => {
      const timer = setTimeout(() => this.onTimeout(worker, id), this.timeoutMs);
      this.pending.set(id, { requests, timer, resolve, reject });
      const message: ToWorker = { type: 'execute', id, buffer, requests: wire };
      worker.postMessage(message, [buffer]);
    });
  }

  async close(): Promise<void> {
    await this.worker.close();
    this.failPending(Errors.unavailable(`model instance of '${this.modelName}' closed before answering`));
  }

  private onMessage(worker: Worker, message: FromWorker): void {
    if (message.type === 'call') {
      void this.serveCall(worker, message);
      return;
    }
    if (message.type !== 'executed' && message.type !== 'execute-failed') return;
    const run = this.pending.get(message.id);
    if (!run) return;
    this.pending.delete(message.id);
    clearTimeout(run.timer);
    if (message.type === 'execute-failed') {
      run.reject(Errors.internal(`model '${this.modelName}': execute() failed: ${message.message}`));
      return;
    }
    run.resolve({
      responses: message.responses.map((response, i) => this.outcome(message.buffer, response, run.requests[i]!)),
      timings: message.timings,
    });
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

  /** Runs the model's inferModel call through the server and answers the worker that asked. */
  private async serveCall(worker: Worker, message: Extract<FromWorker, { type: 'call' }>): Promise<void> {
    const call = message.request;
    let answer: ToWorker;
    let transfer: ArrayBuffer[] = [];
    try {
      if (!this.callModel) throw Errors.unavailable('calls to other models are not available in this server');
      const request: InferenceRequest = {
        modelName: call.model,
        ...(call.version !== undefined && { modelVersion: call.version }),
        inputs: call.inputs.map((s) => ({ name: s.name, datatype: s.datatype, shape: s.shape, data: sliceBytes(message.buffer, s) })),
        ...(call.outputs !== undefined && { outputs: call.outputs.map((name) => ({ name, parameters: {} })) }),
        parameters: call.parameters ?? {},
        ...this.callerOf(message.executeId),
      };
      const response = await this.callModel(request);
      const { buffer, slices } = packTensors([response.outputs]);
      answer = {
        type: 'call-result',
        callId: message.callId,
        model: response.modelName,
        version: response.modelVersion,
        buffer,
        outputs: slices[0]!,
      };
      transfer = [buffer];
    } catch (error) {
      const e = toInferenceServerError(error);
      answer = { type: 'call-failed', callId: message.callId, code: e.code, message: e.message };
    }
    // A worker replaced meanwhile is gone: its call has no one to answer.
    if (this.worker.isCurrent(worker)) worker.postMessage(answer, transfer);
  }

  /**
   * The trace a call made during execute() joins: the first traced request of that batch (a
   * call cannot tell which request of a batch it serves). Nothing when none is traced.
   */
  private callerOf(executeId: number | undefined): InstanceRequest['caller'] {
    if (executeId === undefined) return undefined;
    return this.pending.get(executeId)?.requests.find((r) => r.caller !== undefined)?.caller;
  }

  /** An execute that overran: its batch fails, and the worker is stopped (and, on its exit, replaced). */
  private onTimeout(worker: Worker, id: number): void {
    const run = this.pending.get(id);
    if (!run || !this.worker.isCurrent(worker)) return;
    this.pending.delete(id);
    run.reject(
      Errors.internal(
        `model '${this.modelName}': execute() did not finish within ${this.timeoutMs} ms (parameter ${EXECUTE_TIMEOUT_PARAMETER}); ` +
          'its instance was stopped and is replaced',
      ),
    );
    void worker.terminate();
    // Replaced now, not when the thread has exited: a request arriving meanwhile waits for the new worker.
    this.worker.died(worker, `stopped after its execute timeout of ${this.timeoutMs} ms`);
  }

  private failPending(error: Error): void {
    for (const run of this.pending.values()) {
      clearTimeout(run.timer);
      run.reject(error);
    }
    this.pending.clear();
  }
}
