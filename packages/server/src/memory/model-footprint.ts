import { stat } from 'node:fs/promises';
import type { Backend, InstanceDevice } from '../backends/backend.ts';
import type { MemoryGuard } from './memory-guard.ts';

/**
 * Host memory a model instance's worker thread takes of its own, beyond the session's weights: its
 * V8 isolate and heap, its stack, Node's per-thread state and its message channel. Measured on the
 * 2-core development machine (Node 20, onnxruntime-node 1.30) as 9 to 12 MiB for each further
 * instance of 2x256 MLPs in workers, against 0.5 MiB for the same models run on the event loop
 * (issue 37). An instance on the event loop (event-loop-instance.ts) has no worker and gives it back.
 */
export const INSTANCE_WORKER_BYTES = 12 * 1024 * 1024;

/**
 * What one open instance holds in host memory by this estimate: its worker thread unless it runs on
 * the event loop, and a CPU session's own copy of the weights (ONNX Runtime only: a JavaScript
 * model's code is not weights).
 */
function instanceHostBytes(weightsBytes: number, device: InstanceDevice, sessionWeights: boolean, onEventLoop: boolean): number {
  return (onEventLoop ? 0 : INSTANCE_WORKER_BYTES) + (sessionWeights && device === 'cpu' ? weightsBytes : 0);
}

/**
 * The backend, with each model instance's host-memory footprint counted in the memory guard's
 * baseline while it is open (instanceHostBytes): the same estimate model-loader.ts checks before a
 * version loads; what it misses for the models loaded at start-up is measured by MemoryGuard.settle().
 * `sessionWeights`: the backend's CPU instances hold a copy of the model file (ONNX Runtime's do).
 */
export function withModelFootprints(backend: Backend, memory: MemoryGuard, sessionWeights: boolean): Backend {
  return {
    ...backend,
    async createInstance(options) {
      const weightsBytes = sessionWeights && options.device === 'cpu' ? (await stat(options.modelPath)).size : 0;
      const loaded = await backend.createInstance(options);
      // An instance in a process of its own (a Python model) holds what that process measured once loaded.
      const release = memory.holdAtRest(
        loaded.processBytes ?? instanceHostBytes(weightsBytes, options.device, sessionWeights, loaded.eventLoopRunUs !== undefined),
      );
      const close = loaded.instance.close.bind(loaded.instance);
      loaded.instance.close = async () => {
        try {
          await close();
        } finally {
          release();
        }
      };
      return loaded;
    },
  };
}

/** What one model version's instances take, as the memory guard counts them (withModelFootprints). */
export interface ModelFootprint {
  /** Host memory: a worker thread per instance, and the weights once per CPU instance of ONNX Runtime, bytes. */
  readonly hostBytes: number;
  /** Device memory by GPU (device ordinal): the weights once per instance on it, bytes. */
  readonly gpuBytes: ReadonlyMap<number, number>;
  /** The figures behind it, for messages: `4194304 bytes of weights x 2 CPU instances, and 2 worker threads of 12582912 bytes`. */
  readonly description: string;
}

/**
 * The footprint of a version whose instances open `weightsBytes` of model file on these devices,
 * before they open: the estimate withModelFootprints holds in the memory guard's baseline, every
 * instance in a worker thread (one that lands on the event loop gives its worker's share back once
 * open: workerShareOf), and on a GPU the weights in device memory. `sessionWeights`: ONNX Runtime
 * sessions, whose weights are counted; a JavaScript model's code is not weights.
 */
export function modelFootprint(
  weightsBytes: number,
  instances: readonly { readonly device: InstanceDevice; readonly deviceId: number }[],
  sessionWeights: boolean,
): ModelFootprint {
  const gpuBytes = new Map<number, number>();
  let hostBytes = 0;
  for (const i of instances) {
    hostBytes += instanceHostBytes(weightsBytes, i.device, sessionWeights, false);
    if (sessionWeights && i.device === 'gpu') gpuBytes.set(i.deviceId, (gpuBytes.get(i.deviceId) ?? 0) + weightsBytes);
  }
  const cpu = instances.filter((i) => i.device === 'cpu').length;
  const gpu = instances.length - cpu;
  const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
  const workers = `${plural(instances.length, 'worker thread')} of ${INSTANCE_WORKER_BYTES} bytes`;
  if (!sessionWeights) return { hostBytes, gpuBytes, description: `no ONNX Runtime sessions, ${workers}` };
  const parts = [plural(cpu, 'CPU instance'), ...(gpu > 0 ? [plural(gpu, 'GPU instance')] : [])];
  return { hostBytes, gpuBytes, description: `${weightsBytes} bytes of weights x ${parts.join(' and ')}, and ${workers}` };
}

/** Host bytes a version gives back once open, for its instances that run on the event loop (no worker thread). */
export function workerShareOf(instancesOnEventLoop: number): number {
  return instancesOnEventLoop * INSTANCE_WORKER_BYTES;
}
