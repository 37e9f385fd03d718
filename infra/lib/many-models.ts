import { BASE_ROOT_VOLUME_GIB } from './gpu-capacity.ts';
import type { TaskMemory } from './instance-types.ts';
import { SERVER_BUDGET_FRACTION } from './instance-types.ts';

/**
 * Many models per task (issue 27): requests load the models they name, and the least recently used
 * are evicted to make room. docs/many-models.md ("Sizing many models per host") explains the numbers.
 */
export interface ManyModelsOptions {
  /**
   * `--load-on-demand`: a task loads a model of the repository on its first request (and only
   * those), evicting the least recently used to stay within the limits below.
   * @default false - every model of the repository loads at start-up, as before
   */
  readonly loadOnDemand?: boolean;
  /**
   * `--model-memory-limit`: host memory the loaded models' instances may take, MiB.
   * @default - with loadOnDemand, the server budget less SERVER_RUNTIME_RESERVE_MIB; otherwise no limit
   */
  readonly modelMemoryLimitMiB?: number;
  /**
   * `--model-gpu-memory-limit`: memory the loaded models may take on the task's GPU, MiB.
   * @default - with loadOnDemand, DEFAULT_GPU_MODEL_FRACTION of the GPU's memory; otherwise no limit
   */
  readonly modelGpuMemoryLimitMiB?: number;
  /**
   * `--model-cache-disk-limit`: disk the task's local cache of the S3 repository may take, GiB. The
   * instances' root volume grows by twice this per task it can run.
   * @default - with loadOnDemand, DEFAULT_MODEL_CACHE_DISK_GIB; otherwise no limit and no growth
   */
  readonly modelCacheDiskGiB?: number;
}

/**
 * What the server keeps for itself beside the models within its budget, MiB: the process at rest,
 * ONNX Runtime's and CUDA's libraries and contexts, each instance's session buffers and the requests
 * in flight (the model memory limit counts each instance's worker thread itself). Measured on the
 * 2-core development machine: 100 MiB at rest, 60 MiB more once ONNX Runtime runs, about 3 MiB per
 * CPU instance beyond its weights and worker (test/many-models.test.ts).
 */
export const SERVER_RUNTIME_RESERVE_MIB = 2048;
/** The GPU memory models may take by default: the rest is CUDA's context, ONNX Runtime's arena and activations. */
export const DEFAULT_GPU_MODEL_FRACTION = 0.75;
export const DEFAULT_MODEL_CACHE_DISK_GIB = 50;
/** Default of the eviction thrash alarm: evictions per task per minute. */
export const DEFAULT_EVICTIONS_PER_TASK_PER_MINUTE = 30;

/** The limits decided, the serve flags that pass them, and the disk the instances need. */
export interface ManyModelsPlan {
  readonly loadOnDemand: boolean;
  readonly modelMemoryLimitMiB: number | undefined;
  readonly modelGpuMemoryLimitMiB: number | undefined;
  readonly modelCacheDiskGiB: number | undefined;
  /** Flags for `batchwise serve`. */
  readonly serveFlags: readonly string[];
  /** Root volume of each GPU instance, GiB. */
  readonly rootVolumeGiB: number;
}

/**
 * The container hard limit a task needs for `modelMemoryLimitMiB` of models beside the server's
 * reserve, MiB: for instance types outside the table when memoryLimitMiB is not given.
 */
export function hardLimitForModelsMiB(modelMemoryLimitMiB: number): number {
  return Math.ceil((modelMemoryLimitMiB + SERVER_RUNTIME_RESERVE_MIB) / SERVER_BUDGET_FRACTION);
}

const MIB = 1024 * 1024;

/**
 * Sizes the limits from the task's memory, checks they fit, and sizes the disk: the cache of every
 * task an instance runs, twice (a stopped task's container layer stays on disk until the ECS agent
 * cleans it up, 3 hours by default, while its replacement fills its own).
 */
export function planManyModels(memory: TaskMemory, options: ManyModelsOptions = {}): ManyModelsPlan {
  const onDemand = options.loadOnDemand ?? false;
  const budgetMiB = Math.floor(memory.serverBudgetBytes / MIB);
  for (const [name, value] of Object.entries({
    modelMemoryLimitMiB: options.modelMemoryLimitMiB,
    modelGpuMemoryLimitMiB: options.modelGpuMemoryLimitMiB,
    modelCacheDiskGiB: options.modelCacheDiskGiB,
  })) {
    if (value !== undefined && !(Number.isInteger(value) && value > 0))
      throw new Error(`${name} must be a positive integer, got ${value}.`);
  }
  const hostMiB = options.modelMemoryLimitMiB ?? (onDemand ? budgetMiB - SERVER_RUNTIME_RESERVE_MIB : undefined);
  if (hostMiB !== undefined && hostMiB + SERVER_RUNTIME_RESERVE_MIB > budgetMiB) {
    throw new Error(
      `modelMemoryLimitMiB ${hostMiB} does not fit the task: its server budget is ${budgetMiB} MiB ` +
        `(${SERVER_BUDGET_FRACTION * 100}% of the ${memory.hardLimitMiB} MiB hard limit), of which the server keeps ` +
        `${SERVER_RUNTIME_RESERVE_MIB} MiB beside the models. Set memoryLimitMiB to at least ${hardLimitForModelsMiB(hostMiB)}, ` +
        'pick an instance type with more memory per GPU, or lower modelMemoryLimitMiB.',
    );
  }
  const gpuMiB = options.modelGpuMemoryLimitMiB ?? (onDemand ? Math.floor(memory.gpuMemoryMiB * DEFAULT_GPU_MODEL_FRACTION) : undefined);
  if (gpuMiB !== undefined && gpuMiB > memory.gpuMemoryMiB) {
    throw new Error(`modelGpuMemoryLimitMiB ${gpuMiB} is more than the ${memory.gpuMemoryMiB} MiB of the task's GPU.`);
  }
  const cacheGiB = options.modelCacheDiskGiB ?? (onDemand ? DEFAULT_MODEL_CACHE_DISK_GIB : undefined);
  const serveFlags = [
    ...(onDemand ? ['--load-on-demand'] : []),
    ...(hostMiB !== undefined ? ['--model-memory-limit', String(hostMiB * MIB)] : []),
    ...(gpuMiB !== undefined ? ['--model-gpu-memory-limit', String(gpuMiB * MIB)] : []),
    ...(cacheGiB !== undefined ? ['--model-cache-disk-limit', String(cacheGiB * 1024 * MIB)] : []),
  ];
  return {
    loadOnDemand: onDemand,
    modelMemoryLimitMiB: hostMiB,
    modelGpuMemoryLimitMiB: gpuMiB,
    modelCacheDiskGiB: cacheGiB,
    serveFlags,
    rootVolumeGiB: BASE_ROOT_VOLUME_GIB + 2 * memory.gpuCount * (cacheGiB ?? 0),
  };
}
