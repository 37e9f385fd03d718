/** What the stack needs to know about a GPU instance type to size one task per GPU. */
export interface GpuInstanceSpec {
  /** Installed memory of the instance, MiB. */
  readonly memoryMiB: number;
  /** Number of GPUs; the service runs one task per GPU. */
  readonly gpuCount: number;
  /** Memory of one GPU, MiB (nominal). */
  readonly gpuMemoryMiB: number;
}

const GIB = 1024;

function family(
  gpuMemoryMiB: number,
  sizes: Record<string, [memoryGiB: number, gpuCount: number]>,
  prefix: string,
): Record<string, GpuInstanceSpec> {
  return Object.fromEntries(
    Object.entries(sizes).map(([size, [memoryGiB, gpuCount]]) => [
      `${prefix}.${size}`,
      { memoryMiB: memoryGiB * GIB, gpuCount, gpuMemoryMiB },
    ]),
  );
}

/** Published sizes of the g4dn (T4 16 GiB), g5 (A10G 24 GiB) and g6 (L4 24 GiB) families. */
export const GPU_INSTANCE_TYPES: Readonly<Record<string, GpuInstanceSpec>> = {
  ...family(
    16 * GIB,
    {
      xlarge: [16, 1],
      '2xlarge': [32, 1],
      '4xlarge': [64, 1],
      '8xlarge': [128, 1],
      '12xlarge': [192, 4],
      '16xlarge': [256, 1],
    },
    'g4dn',
  ),
  ...family(
    24 * GIB,
    {
      xlarge: [16, 1],
      '2xlarge': [32, 1],
      '4xlarge': [64, 1],
      '8xlarge': [128, 1],
      '12xlarge': [192, 4],
      '16xlarge': [256, 1],
      '24xlarge': [384, 4],
      '48xlarge': [768, 8],
    },
    'g5',
  ),
  ...family(
    24 * GIB,
    {
      xlarge: [16, 1],
      '2xlarge': [32, 1],
      '4xlarge': [64, 1],
      '8xlarge': [128, 1],
      '12xlarge': [192, 4],
      '16xlarge': [256, 1],
      '24xlarge': [384, 4],
      '48xlarge': [768, 8],
    },
    'g6',
  ),
};

/**
 * Memory left to the OS, the kernel's own reservations (ECS registers less than the
 * installed memory) and the ECS agent: 10% of the instance, at least 2 GiB.
 */
export function hostHeadroomMiB(instanceMemoryMiB: number): number {
  return Math.max(2 * GIB, Math.ceil(instanceMemoryMiB * 0.1));
}

/** Soft limit and server budget as a fraction of the hard limit (see taskMemoryFor). */
export const SERVER_BUDGET_FRACTION = 0.85;

export interface TaskMemory {
  /** Container hard limit (`memory`), MiB: exceeding it is an OOM kill. */
  readonly hardLimitMiB: number;
  /** Container soft limit (`memoryReservation`), MiB: what ECS reserves when placing. */
  readonly reservationMiB: number;
  /** `--memory-limit` given to the server, bytes: its memory guard rejects work above it. */
  readonly serverBudgetBytes: number;
  readonly gpuCount: number;
  readonly gpuMemoryMiB: number;
}

export interface TaskMemoryOverrides {
  readonly memoryLimitMiB?: number;
  readonly memoryReservationMiB?: number;
  /** GPU memory for instance types outside the table. @default 16384 */
  readonly gpuMemoryMiB?: number;
  /**
   * Hard limit of sidecars in the task (the tracing collector), MiB: taken out of the task's
   * share of the instance, so the server's hard limit, soft limit and budget shrink with it.
   * @default 0
   */
  readonly sidecarMemoryMiB?: number;
}

/**
 * Sizes one task (one GPU) on `instanceType`. The hard limit is the instance memory
 * less host headroom, split across its GPUs. The server budget and the soft limit are
 * the same value, 85% of the hard limit: the 15% between them is for what the
 * server's accounting does not see (V8 heap, worker threads, CUDA context, ONNX Runtime
 * arenas), so its guard refuses work before the kernel kills the container.
 */
export function taskMemoryFor(instanceType: string, overrides: TaskMemoryOverrides = {}): TaskMemory {
  const spec = GPU_INSTANCE_TYPES[instanceType];
  if (!spec && overrides.memoryLimitMiB === undefined) {
    throw new Error(
      `Unknown instance type '${instanceType}': no memory table entry. Use one of ` +
        `${Object.keys(GPU_INSTANCE_TYPES).join(', ')}, or give the container hard limit ` +
        `explicitly with context 'memoryLimitMiB'.`,
    );
  }
  const gpuCount = spec?.gpuCount ?? 1;
  let hardLimitMiB: number;
  if (spec) {
    const sidecarMiB = overrides.sidecarMemoryMiB ?? 0;
    const perTaskMiB = Math.floor((spec.memoryMiB - hostHeadroomMiB(spec.memoryMiB)) / gpuCount);
    const serverMiB = perTaskMiB - sidecarMiB;
    hardLimitMiB = overrides.memoryLimitMiB ?? serverMiB;
    if (hardLimitMiB > serverMiB) {
      throw new Error(
        `memoryLimitMiB ${hardLimitMiB} does not fit ${instanceType}: at most ${serverMiB} MiB ` +
          `for the server (${spec.memoryMiB} MiB less host headroom, ${gpuCount} task(s) per instance` +
          (sidecarMiB > 0 ? `, less ${sidecarMiB} MiB for the tracing collector).` : ').'),
      );
    }
  } else {
    hardLimitMiB = overrides.memoryLimitMiB!;
  }
  if (!Number.isInteger(hardLimitMiB) || hardLimitMiB < 1024) {
    throw new Error(`memoryLimitMiB must be an integer of at least 1024, got ${hardLimitMiB}.`);
  }
  const reservationMiB = overrides.memoryReservationMiB ?? Math.floor(hardLimitMiB * SERVER_BUDGET_FRACTION);
  if (reservationMiB > hardLimitMiB) {
    throw new Error(`memoryReservationMiB (${reservationMiB}) must not exceed the hard limit memoryLimitMiB (${hardLimitMiB}).`);
  }
  const budgetMiB = Math.floor(hardLimitMiB * SERVER_BUDGET_FRACTION);
  return {
    hardLimitMiB,
    reservationMiB,
    serverBudgetBytes: budgetMiB * 1024 * 1024,
    gpuCount,
    gpuMemoryMiB: spec?.gpuMemoryMiB ?? overrides.gpuMemoryMiB ?? 16 * GIB,
  };
}
