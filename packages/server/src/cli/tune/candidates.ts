import { DYNAMIC_BATCHING_PARAMETER } from '../../config/auto-complete.ts';
import type { ModelConfig } from '../../config/model-config.ts';

/** What `tune` varies in a config.pbtxt. */
export interface Knobs {
  /** 0: the model does not batch, and the batching knobs stay unused. */
  readonly maxBatchSize: number;
  readonly preferredBatchSizes: readonly number[];
  readonly maxQueueDelayUs: number;
  readonly instanceCount: number;
  /** `cuda`: KIND_GPU instances on ONNX Runtime's CUDA execution provider (the one GPU accelerator our ONNX backend runs). */
  readonly device: 'cpu' | 'cuda';
  /** ONNX Runtime intra-op threads per instance (`intra_op_thread_count`); 0 lets ONNX Runtime decide. */
  readonly intraOpThreads: number;
}

/** The machine tuned for: the one `tune` runs on. */
export interface Host {
  readonly cpuCores: number;
  readonly gpuCount: number;
}

const INTRA_OP = 'intra_op_thread_count';

/** The knobs a config sets now (`effective`: the config as the server completed it, for max_batch_size). */
export function knobsOf(config: ModelConfig, effective: ModelConfig): Knobs {
  const groups = config.instance_group ?? [];
  const gpu = groups.some((g) => g.kind === 'KIND_GPU');
  const threads = Number(config.parameters?.[INTRA_OP]?.string_value ?? 0);
  return {
    maxBatchSize: effective.max_batch_size,
    preferredBatchSizes: config.dynamic_batching?.preferred_batch_size ?? [],
    maxQueueDelayUs: config.dynamic_batching?.max_queue_delay_microseconds ?? 0,
    instanceCount: groups.length === 0 ? 1 : groups.reduce((n, g) => n + (g.count ?? 1), 0),
    device: gpu ? 'cuda' : 'cpu',
    intraOpThreads: Number.isSafeInteger(threads) && threads > 0 ? threads : 0,
  };
}

/**
 * `config` with the knobs set: one instance group (CPU, or GPU with the CUDA accelerator named),
 * dynamic_batching with the delay and preferred sizes, the intra-op thread parameter. Everything
 * else in the config is kept as it is.
 */
export function applyKnobs(config: ModelConfig, knobs: Knobs): ModelConfig {
  const parameters = { ...config.parameters };
  delete parameters[INTRA_OP];
  if (knobs.intraOpThreads > 0) parameters[INTRA_OP] = { string_value: String(knobs.intraOpThreads) };
  const out: ModelConfig = {
    ...config,
    max_batch_size: knobs.maxBatchSize,
    instance_group: [{ kind: knobs.device === 'cuda' ? 'KIND_GPU' : 'KIND_CPU', count: knobs.instanceCount }],
  };
  if (knobs.maxBatchSize > 0) {
    // Batching is on unless the parameter turns it off: a tuned config always batches.
    delete parameters[DYNAMIC_BATCHING_PARAMETER];
    const batching = { ...config.dynamic_batching, max_queue_delay_microseconds: knobs.maxQueueDelayUs };
    if (knobs.preferredBatchSizes.length > 0) batching.preferred_batch_size = [...knobs.preferredBatchSizes];
    else delete batching.preferred_batch_size;
    out.dynamic_batching = batching;
  }
  const accelerators = { ...config.optimization?.execution_accelerators };
  if (knobs.device === 'cuda') {
    const cuda = accelerators.gpu_execution_accelerator?.find((a) => a.name === 'cuda');
    accelerators.gpu_execution_accelerator = [cuda ?? { name: 'cuda' }];
  } else delete accelerators.gpu_execution_accelerator;
  const optimization: NonNullable<ModelConfig['optimization']> = { ...config.optimization, execution_accelerators: accelerators };
  if (Object.keys(accelerators).length === 0) delete optimization.execution_accelerators;
  if (Object.keys(optimization).length > 0) out.optimization = optimization;
  else delete out.optimization;
  if (Object.keys(parameters).length > 0) out.parameters = parameters;
  else delete out.parameters;
  return out;
}

/** A short stable name, e.g. `cpu i2 t1 b32 d500us p[16,32]`. */
export function candidateId(k: Knobs): string {
  const parts = [k.device, `i${k.instanceCount}`];
  if (k.device === 'cpu') parts.push(k.intraOpThreads > 0 ? `t${k.intraOpThreads}` : 'tauto');
  if (k.maxBatchSize > 0) {
    parts.push(`b${k.maxBatchSize}`, `d${k.maxQueueDelayUs}us`);
    if (k.preferredBatchSizes.length > 0) parts.push(`p[${k.preferredBatchSizes.join(',')}]`);
  }
  return parts.join(' ');
}

/**
 * The current config's id. A batching model whose config turns dynamic batching off runs every
 * request alone, while its knobs name the batching config the search measures next: it gets an
 * id of its own, so that batching config is measured too.
 */
export function currentCandidateId(knobs: Knobs, effective: ModelConfig): string {
  const unbatched = effective.max_batch_size > 0 && effective.dynamic_batching === undefined;
  return `${candidateId(knobs)}${unbatched ? ' unbatched' : ''}`;
}

/** Resource cost for tie-breaks: CPU threads in use (ONNX Runtime's default: every core), or GPU instances. */
export function knobsCost(k: Knobs, host: Host): number {
  return k.device === 'cuda' ? k.instanceCount : k.instanceCount * (k.intraOpThreads > 0 ? k.intraOpThreads : host.cpuCores);
}

/** One step of the search: variants of the best candidate so far along one dimension. */
export interface Stage {
  readonly name: string;
  variants(best: Knobs): Knobs[];
}

const uniq = (xs: readonly number[]): number[] => [...new Set(xs)].sort((a, b) => a - b);
const powersOfTwoUpTo = (n: number): number[] => uniq([1, 2, 4, 8, 16, 32, 64, 128, 256].filter((p) => p <= n).concat(n));

/**
 * Coordinate search, one dimension at a time from the best so far, in the order that moves
 * throughput most on an inference server: where it runs (CPU or CUDA), how long the batcher
 * waits, how many instances with how many threads each, then batch sizes. `topConcurrency` bounds
 * the batch sizes worth trying: a batch never holds more requests than are outstanding.
 */
export function searchStages(host: Host, topConcurrency: number): Stage[] {
  const stages: Stage[] = [];
  if (host.gpuCount > 0) {
    stages.push({
      name: 'accelerator',
      variants: (b) => [
        { ...b, device: 'cuda', intraOpThreads: 0 },
        { ...b, device: 'cpu' },
      ],
    });
  }
  stages.push({
    name: 'queue delay',
    variants: (b) => (b.maxBatchSize > 0 ? [0, 500, 2000, 8000].map((d) => ({ ...b, maxQueueDelayUs: d })) : []),
  });
  stages.push({
    name: 'instances and threads',
    variants: (b) => {
      if (b.device === 'cuda') return [1, 2, 3].map((n) => ({ ...b, instanceCount: n * Math.max(1, host.gpuCount) }));
      // Instances x threads at most the cores (oversubscribing cores only adds contention), plus ONNX Runtime's own choice.
      const counts = uniq([1, 2, 4].filter((n) => n <= host.cpuCores));
      return counts.flatMap((n) => {
        const threads = uniq([Math.max(1, Math.floor(host.cpuCores / n)), n === 1 ? 0 : Math.max(1, Math.floor(host.cpuCores / n))]);
        return threads.map((t) => ({ ...b, instanceCount: n, intraOpThreads: t }));
      });
    },
  });
  stages.push({
    name: 'batch sizes',
    variants: (b) => {
      if (b.maxBatchSize <= 0) return [];
      const sizes = powersOfTwoUpTo(Math.max(b.maxBatchSize, topConcurrency)).filter((s) => s >= 4);
      const perInstance = Math.max(1, Math.floor(topConcurrency / b.instanceCount));
      return [
        ...sizes.map((s) => ({ ...b, maxBatchSize: s, preferredBatchSizes: [] })),
        // A preferred size the traffic can fill: the outstanding requests each instance sees.
        {
          ...b,
          maxBatchSize: Math.max(b.maxBatchSize, perInstance),
          preferredBatchSizes: [Math.min(perInstance, Math.max(b.maxBatchSize, perInstance))],
        },
      ];
    },
  });
  return stages;
}
