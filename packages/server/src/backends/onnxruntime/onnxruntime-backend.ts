import type { Worker } from 'node:worker_threads';
import type { Tensor } from '../../tensor/tensor.ts';
import type { Backend, ExecutionResult, InstanceOptions, LoadedInstance, ModelInstance } from '../backend.ts';
import { GpuOutOfMemoryError, isGpuOutOfMemory } from '../gpu-oom.ts';
import { CrashWindow, spawnWorkerThread, waitUntilLoaded } from '../worker-supervision.ts';
import type { FromWorker, ToWorker, WireTensor, WorkerInit } from './protocol.ts';
import { ownBuffer, transferListOf } from './protocol.ts';

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
  private fatalError: Error | undefined;
  private closing = false;
  private readonly crashes = new CrashWindow();
  private replacement: Promise<void> | undefined;

  /** Workers whose death was handled ('error' and 'exit' both report one death). */
  private readonly dead = new WeakSet<Worker>();

  constructor(
    private worker: Worker,
    private readonly spawn: () => Worker,
    private readonly modelName: string,
    readonly heapLimitBytes: number | undefined,
  ) {
    this.attach(worker);
  }

  private attach(worker: Worker): void {
    worker.on('message', (message: FromWorker) => this.onMessage(message));
    worker.on('error', (error) => this.onDeath(worker, error.message));
    worker.on('exit', (code) => this.onDeath(worker, `exited with code ${code}`));
  }

  async execute(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult> {
    if (this.replacement) await this.replacement;
    if (this.fatalError) throw this.fatalError;
    // A closed instance's worker has exited: a run posted to it would never answer.
    if (this.closing) throw new Error(`model instance of '${this.modelName}' is closed (its version was unloaded)`);
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
      this.worker.postMessage(message, transferListOf(wire));
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.fatalError) return;
    const worker = this.worker;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    const message: ToWorker = { type: 'close' };
    worker.postMessage(message);
    const timer = setTimeout(() => void worker.terminate(), 5_000);
    await exited;
    clearTimeout(timer);
    const unanswered = new Error(`model instance of '${this.modelName}' closed before answering`);
    for (const run of this.pending.values()) run.reject(unanswered);
    this.pending.clear();
  }

  /** Test hook: kills the worker thread as a native crash would. */
  crashForTesting(): Promise<number> {
    return this.worker.terminate();
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

  private onDeath(worker: Worker, how: string): void {
    if (worker !== this.worker || this.closing || this.dead.has(worker)) return;
    this.dead.add(worker);
    const error = new Error(`model instance of '${this.modelName}' crashed (${how}); the batch it was running failed`);
    for (const run of this.pending.values()) run.reject(error);
    this.pending.clear();
    if (this.crashes.record()) {
      this.fatalError = new Error(`model instance of '${this.modelName}' ${this.crashes.describe(how)}`);
      this.onFatal?.(this.fatalError);
      return;
    }
    this.replacement = waitUntilLoaded<Loaded>(this.spawn()).then(
      (fresh) => {
        this.worker = fresh;
        this.attach(fresh);
        this.replacement = undefined;
      },
      (reloadError: Error) => {
        this.fatalError = new Error(`model instance of '${this.modelName}' could not be restarted: ${reloadError.message}`);
        this.replacement = undefined;
        this.onFatal?.(this.fatalError);
      },
    );
  }

  /** Called once when the instance gives up (set by whoever owns the instance). */
  onFatal: ((error: Error) => void) | undefined;
}

type Loaded = Omit<Extract<FromWorker, { type: 'loaded' }>, 'type'>;

export function createOnnxRuntimeBackend(backendOptions: OnnxRuntimeBackendOptions = {}): Backend {
  return {
    name: 'onnxruntime',
    createInstance: (options) => createInstance(options, backendOptions),
  };
}

export const onnxRuntimeBackend: Backend = createOnnxRuntimeBackend();

async function createInstance(options: InstanceOptions, backendOptions: OnnxRuntimeBackendOptions): Promise<LoadedInstance> {
  const init: WorkerInit = {
    modelPath: options.modelPath,
    device: options.device,
    deviceId: options.deviceId,
    allowCpuFallback: options.allowCpuFallback,
    settings: options.sessionOptions,
  };
  const spawn = () => spawnWorker(init, backendOptions);
  const worker = await waitUntilLoaded<Loaded>(spawn());
  const { io, executionProvider, fallbackReason } = worker.loaded;
  return {
    instance: new WorkerInstance(worker, spawn, options.modelName, backendOptions.workerHeapLimitBytes),
    io,
    executionProvider,
    ...(fallbackReason !== undefined && { fallbackReason }),
  };
}
