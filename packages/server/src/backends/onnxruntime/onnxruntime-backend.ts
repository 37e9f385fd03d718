import { Worker } from 'node:worker_threads';
import type { Tensor } from '../../tensor/tensor.ts';
import type { Backend, ExecutionResult, InstanceOptions, LoadedInstance, ModelInstance } from '../backend.ts';
import type { FromWorker, ToWorker, WireTensor, WorkerInit } from './protocol.ts';
import { ownBuffer, transferListOf } from './protocol.ts';

const RUNNING_FROM_SOURCE = import.meta.url.endsWith('.ts');

function spawnWorker(init: WorkerInit): Worker {
  if (RUNNING_FROM_SOURCE) {
    return new Worker(new URL('./tsx-worker.mjs', import.meta.url), {
      workerData: { ...init, tsEntry: new URL('./worker.ts', import.meta.url).href },
    });
  }
  return new Worker(new URL('./worker.js', import.meta.url), { workerData: init });
}

interface PendingRun {
  resolve(result: ExecutionResult): void;
  reject(error: Error): void;
}

/** Main-thread handle of one worker thread that owns one ONNX Runtime session. */
class WorkerInstance implements ModelInstance {
  private nextId = 0;
  private readonly pending = new Map<number, PendingRun>();
  private exitError: Error | undefined;

  constructor(
    private readonly worker: Worker,
    private readonly modelName: string,
  ) {
    worker.on('message', (message: FromWorker) => this.onMessage(message));
    worker.on('error', (error) => this.failAll(error));
    worker.on('exit', (code) => this.failAll(new Error(`model instance of '${modelName}' exited (code ${code})`)));
  }

  execute(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult> {
    if (this.exitError) return Promise.reject(this.exitError);
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
    if (this.exitError) return;
    const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
    const message: ToWorker = { type: 'close' };
    this.worker.postMessage(message);
    const timer = setTimeout(() => void this.worker.terminate(), 5_000);
    await exited;
    clearTimeout(timer);
  }

  private onMessage(message: FromWorker): void {
    if (message.type !== 'result' && message.type !== 'run-failed') return;
    const run = this.pending.get(message.id);
    if (!run) return;
    this.pending.delete(message.id);
    if (message.type === 'run-failed') {
      run.reject(new Error(message.message));
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

  private failAll(error: Error): void {
    this.exitError ??= new Error(`model instance of '${this.modelName}' failed: ${error.message}`);
    for (const run of this.pending.values()) run.reject(this.exitError);
    this.pending.clear();
  }
}

export const onnxRuntimeBackend: Backend = {
  name: 'onnxruntime',
  createInstance(options: InstanceOptions): Promise<LoadedInstance> {
    const worker = spawnWorker({
      modelPath: options.modelPath,
      device: options.device,
      deviceId: options.deviceId,
      allowCpuFallback: options.allowCpuFallback,
      settings: options.sessionOptions,
    });
    return new Promise<LoadedInstance>((resolve, reject) => {
      const onError = (error: Error) => {
        cleanup();
        reject(error);
      };
      const onExit = (code: number) => {
        cleanup();
        reject(new Error(`model instance exited during load (code ${code})`));
      };
      const onMessage = (message: FromWorker) => {
        if (message.type === 'load-failed') {
          cleanup();
          void worker.terminate();
          reject(new Error(message.message));
        } else if (message.type === 'loaded') {
          cleanup();
          resolve({
            instance: new WorkerInstance(worker, options.modelName),
            io: message.io,
            executionProvider: message.executionProvider,
            ...(message.fallbackReason !== undefined && { fallbackReason: message.fallbackReason }),
          });
        }
      };
      const cleanup = () => {
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
      };
      worker.on('message', onMessage);
      worker.on('error', onError);
      worker.on('exit', onExit);
    });
  },
};
