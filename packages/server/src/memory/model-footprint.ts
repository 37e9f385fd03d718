import { stat } from 'node:fs/promises';
import type { Backend } from '../backends/backend.ts';
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
    name: backend.name,
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
