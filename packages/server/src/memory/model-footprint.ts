import { stat } from 'node:fs/promises';
import type { Backend, InstanceDevice } from '../backends/backend.ts';
import type { MemoryGuard } from './memory-guard.ts';

/**
 * The backend, with each model instance's host-memory footprint counted in the memory
 * guard's baseline while it is open: a CPU instance holds its own copy of the weights (about
 * the model file's size), a CUDA instance keeps them in device memory. The same estimate
 * model-loader.ts checks before a version loads; what it misses for the models loaded at
 * start-up is measured by MemoryGuard.settle().
 */
export function withModelFootprints(backend: Backend, memory: MemoryGuard): Backend {
  return {
    ...backend,
    async createInstance(options) {
      const bytes = options.device === 'cpu' ? (await stat(options.modelPath)).size : 0;
      const loaded = await backend.createInstance(options);
      const release = memory.holdAtRest(bytes);
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
  /** Host memory: the weights once per CPU instance, bytes. */
  readonly hostBytes: number;
  /** Device memory by GPU (CUDA device ordinal): the weights once per instance on it, bytes. */
  readonly gpuBytes: ReadonlyMap<number, number>;
  /** The figures behind it, for messages: `4194304 bytes of weights x 2 CPU instances`. */
  readonly description: string;
}

/**
 * The footprint of a version whose instances open `weightsBytes` of model file on these devices:
 * the estimate withModelFootprints holds in the memory guard's baseline (a CPU session keeps its own
 * copy of the weights), and on a GPU the weights in device memory. Only ONNX Runtime sessions are
 * counted, as the guard counts them: a JavaScript model's code is not weights.
 */
export function modelFootprint(
  weightsBytes: number,
  instances: readonly { readonly device: InstanceDevice; readonly deviceId: number }[],
  counted: boolean,
): ModelFootprint {
  if (!counted) return { hostBytes: 0, gpuBytes: new Map(), description: 'no ONNX Runtime sessions' };
  const cpu = instances.filter((i) => i.device === 'cpu').length;
  const gpuBytes = new Map<number, number>();
  for (const i of instances) if (i.device === 'gpu') gpuBytes.set(i.deviceId, (gpuBytes.get(i.deviceId) ?? 0) + weightsBytes);
  const gpu = instances.length - cpu;
  const parts = [`${cpu} CPU instance${cpu === 1 ? '' : 's'}`, ...(gpu > 0 ? [`${gpu} GPU instance${gpu === 1 ? '' : 's'}`] : [])];
  return { hostBytes: weightsBytes * cpu, gpuBytes, description: `${weightsBytes} bytes of weights x ${parts.join(' and ')}` };
}
