import type { Worker } from 'node:worker_threads';
import type { Tensor } from '../../tensor/tensor.ts';
import type { Backend, ExecutionResult, InstanceOptions, LoadedInstance, ModelInstance } from '../backend.ts';
import { GpuOutOfMemoryError, isGpuOutOfMemory } from '../gpu-oom.ts';
import { spawnWorkerThread, SupervisedWorker, waitUntilLoaded } from '../worker-supervision.ts';
import type { FromWorker, ToWorker, WireTensor, WorkerInit } from './protocol.ts';
import { ownBuffer, transferListOf } from './protocol.ts';
import { createEventLoopInstance, eventLoopCandidate, timeFullBatch } from './event-loop-instance.ts';
import { unappliedProviderOptions } from './session-options.ts';
import { Errors } from '../../errors/errors.ts';

export interface OnnxRuntimeBackendOptions {
  /**
   * Old-generation heap limit of each worker thread, bytes. A worker whose JavaScript heap
   * outgrows it (BYTES tensors are decoded into strings there) dies alone with
   * ERR_WORKER_OUT_OF_MEMORY and is replaced like a crash; without a limit, V8's fatal
   * out-of-memory takes the whole process. Native allocations of ONNX Runtime are not under it.
   * @default Node's default heap limit
   */
  readonly workerHeapLimitBytes?: number;
}

function spawnWorker(init: WorkerInit, options: OnnxRuntimeBackendOptions): Worker {
  return spawnWorkerThread(new URL('./', import.meta.url), init, options.workerHeapLimitBytes);
}

interface PendingRun {
  resolve(result: ExecutionResult): void;
  reject(error: Error): void;
}

/**
 * Main-thread handle of one worker thread that owns one ONNX Runtime session. A worker that
 * dies (native crash, out of memory inside ONNX Runtime) fails only the batch it was running
 * and is replaced; repeated deaths leave the instance failed with the reason.
 */
class WorkerInstance implements ModelInstance {
  private nextId = 0;
  private readonly pending = new Map<number, PendingRun>();
  private readonly worker: SupervisedWorker<FromWorker>;

  constructor(
    first: Worker,
    spawn: () => Worker,
    private readonly modelName: string,
    readonly heapLimitBytes: number | undefined,
  ) {
    this.worker = new SupervisedWorker(first, {
      spawn,
      instance: `model instance of '${modelName}'`,
      onMessage: (_, message) => this.onMessage(message),
      onDeath: (how) => this.failPending(new Error(`model instance of '${modelName}' crashed (${how}); the batch it was running failed`)),
      closeGraceMs: 5_000,
    });
  }

  /** Called once when the instance gives up (set by whoever owns the instance). */
  set onFatal(handler: ((error: Error) => void) | undefined) {
    this.worker.onFatal = handler;
  }

  get onFatal(): ((error: Error) => void) | undefined {
    return this.worker.onFatal;
  }

  async execute(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult> {
    const worker = await this.worker.ready();
    const id = this.nextId++;
    const wire: WireTensor[] = inputs.map((t) => ({
      name: t.name,
      datatype: t.datatype,
      shape: t.shape,
      buffer: ownBuffer(t.data),
    }));
    return new Promise<ExecutionResult>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      const message: ToWorker = { type: 'run', id, inputs: wire, outputNames };
      worker.postMessage(message, transferListOf(wire));
    });
  }

  async close(): Promise<void> {
    await this.worker.close();
    this.failPending(new Error(`model instance of '${this.modelName}' closed before answering`));
  }

  /** Test hook: kills the worker thread as a native crash would. */
  crashForTesting(): Promise<number> {
    return this.worker.crashForTesting();
  }

  private failPending(error: Error): void {
    for (const run of this.pending.values()) run.reject(error);
    this.pending.clear();
  }

  private onMessage(message: FromWorker): void {
    if (message.type !== 'result' && message.type !== 'run-failed') return;
    const run = this.pending.get(message.id);
    if (!run) return;
    this.pending.delete(message.id);
    if (message.type === 'run-failed') {
      run.reject(
        isGpuOutOfMemory(message.message)
          ? new GpuOutOfMemoryError(`GPU out of memory while running model '${this.modelName}': ${message.message}`)
          : new Error(message.message),
      );
      return;
    }
    run.resolve({
      outputs: message.outputs.map((t) => ({
        name: t.name,
        datatype: t.datatype,
        shape: t.shape,
        data: new Uint8Array(t.buffer),
      })),
      timings: message.timings,
    });
  }
}

type Loaded = Omit<Extract<FromWorker, { type: 'loaded' }>, 'type'>;

export function createOnnxRuntimeBackend(backendOptions: OnnxRuntimeBackendOptions = {}): Backend {
  return {
    name: 'onnxruntime',
    createInstance: (options) => createInstance(options, backendOptions),
    unappliedSettings: unappliedProviderOptions,
  };
}

export const onnxRuntimeBackend: Backend = createOnnxRuntimeBackend();

async function createInstance(options: InstanceOptions, backendOptions: OnnxRuntimeBackendOptions): Promise<LoadedInstance> {
  const webgpu = options.sessionOptions.gpuProviders?.some((p) => p.name === 'webgpu');
  if (options.device === 'gpu' && webgpu && options.deviceId !== 0) {
    // onnxruntime-node 1.30 takes no device for WebGPU: Dawn picks the adapter, whatever GPU was asked for.
    throw Errors.invalidArg(
      `model '${options.modelName}': the webgpu accelerator cannot place an instance on GPU ${options.deviceId}: ` +
        'ONNX Runtime for Node.js lets WebGPU choose its own adapter; give the instance group gpus: [ 0 ], or each container one GPU',
    );
  }
  const init: WorkerInit = {
    modelPath: options.modelPath,
    device: options.device,
    deviceId: options.deviceId,
    allowCpuFallback: options.allowCpuFallback,
    settings: options.sessionOptions,
  };
  // Before a worker starts: a bad batchwise_event_loop_run_us fails the load here.
  const candidate = await eventLoopCandidate(options);
  const spawn = () => spawnWorker(init, backendOptions);
  const worker = await waitUntilLoaded<Loaded>(spawn());
  const { io, executionProvider, fallbackReason } = worker.loaded;
  const instance = new WorkerInstance(worker, spawn, options.modelName, backendOptions.workerHeapLimitBytes);
  if (candidate) {
    const outputNames = io.outputs.map((o) => o.name);
    const runUs = await timeFullBatch(instance, candidate.batch, outputNames, candidate.limitUs);
    if (runUs <= candidate.limitUs) {
      const onEventLoop = await createEventLoopInstance(options);
      await instance.close();
      return { instance: onEventLoop, io, executionProvider, eventLoopRunUs: Math.round(runUs) };
    }
  }
  return { instance, io, executionProvider, ...(fallbackReason !== undefined && { fallbackReason }) };
}
