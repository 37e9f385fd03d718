import type { ModelQueuePolicy } from '../config/model-config.ts';
import { Errors, toInferenceServerError } from '../core/errors.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { assembleBatch, splitOutputs } from './batch-assembly.ts';
import { systemClock, type Clock } from './clock.ts';
import type { QueuedRequest, Scheduler, SchedulerContext } from './scheduler.ts';

/** What the batcher does, decided once from the config at load time. */
export interface BatchingOptions {
  /** false: every request runs alone (no dynamic_batching); true: Triton's dynamic batcher. */
  readonly dynamic: boolean;
  /** Samples per batch; 1 for models without batching. */
  readonly maxBatchSize: number;
  readonly preferredBatchSizes: readonly number[];
  readonly maxQueueDelayNs: bigint;
  /**
   * Send before max_queue_delay when the next request is not expected in time (on unless
   * the model sets `batchwise_adaptive_queue_delay: "false"`).
   */
  readonly adaptiveDelay: boolean;
  readonly preserveOrdering: boolean;
  /** 0: one level. Otherwise levels 1..n, 1 served first. */
  readonly priorityLevels: number;
  readonly defaultPriorityLevel: number;
  readonly defaultQueuePolicy: ModelQueuePolicy;
  readonly priorityQueuePolicy: ReadonlyMap<number, ModelQueuePolicy>;
}

export function batchingOptionsFromConfig(context: SchedulerContext): BatchingOptions {
  const { config } = context;
  const db = config.dynamic_batching;
  const levels = db?.priority_levels ?? 0;
  return {
    dynamic: db !== undefined && config.max_batch_size > 0,
    maxBatchSize: Math.max(1, config.max_batch_size),
    preferredBatchSizes: [...(db?.preferred_batch_size ?? [])].sort((a, b) => b - a),
    maxQueueDelayNs: BigInt(db?.max_queue_delay_microseconds ?? 0) * 1000n,
    adaptiveDelay: config.parameters?.['batchwise_adaptive_queue_delay']?.string_value.trim().toLowerCase() !== 'false',
    preserveOrdering: db?.preserve_ordering ?? false,
    priorityLevels: levels,
    defaultPriorityLevel: levels > 0 ? db?.default_priority_level || levels : 1,
    defaultQueuePolicy: db?.default_queue_policy ?? {},
    priorityQueuePolicy: new Map(Object.entries(db?.priority_queue_policy ?? {}).map(([k, v]) => [Number(k), v])),
  };
}

interface Waiting {
  readonly request: QueuedRequest;
  readonly sequence: number;
  readonly level: number;
  resolve(outputs: Tensor[]): void;
  reject(error: Error): void;
  timer: unknown;
  /** DELAY action: the timeout passed; served after every request that is still in time. */
  delayed: boolean;
}

/**
 * Queues of one model version and the instances that serve them. Forms batches as Triton's
 * dynamic batcher documents (largest batch up to max; at once when a preferred or the maximum
 * size can be formed; otherwise after max_queue_delay from the oldest request), with priority
 * levels, queue policies (size limit, timeouts that fire on time even while every instance is
 * busy, REJECT or DELAY) and optional ordering. Without dynamic batching each request runs alone.
 * A batch forms only when an instance is free, so batches grow while all instances are busy.
 */
export class BatchingScheduler implements Scheduler {
  /** One FIFO per priority level (index level-1), then the delayed requests. */
  private readonly queues: Waiting[][];
  private readonly delayed: Waiting[] = [];
  private readonly freeInstances: number[];
  private queued = 0;
  private executing = 0;
  private nextSequence = 0;
  private nextToDeliver = 0;
  private readonly finished = new Map<number, () => void>();
  private delayTimer: unknown;
  /** Smoothed time between arrivals: whether waiting for company is worth it. */
  private interArrivalNs: number | undefined;
  private lastArrivalNs: bigint | undefined;
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly context: SchedulerContext,
    private readonly options: BatchingOptions = batchingOptionsFromConfig(context),
    private readonly clock: Clock = systemClock,
  ) {
    this.queues = Array.from({ length: Math.max(1, options.priorityLevels) }, () => []);
    this.freeInstances = context.instances.map((_, i) => i);
  }

  get pendingCount(): number {
    return this.queued + this.executing;
  }

  enqueue(request: QueuedRequest): Promise<Tensor[]> {
    const { options } = this;
    const level = request.priority === 0 ? options.defaultPriorityLevel : request.priority;
    if (level > this.queues.length) {
      return Promise.reject(
        Errors.invalidArg(`request priority ${request.priority} is out of range: the model has ${options.priorityLevels || 1} priority levels`),
      );
    }
    const policy = options.priorityQueuePolicy.get(level) ?? options.defaultQueuePolicy;
    const queue = this.queues[level - 1]!;
    if ((policy.max_queue_size ?? 0) > 0 && queue.length >= policy.max_queue_size!) {
      this.context.stats.recordFailure(request, 'REJECTED');
      return Promise.reject(Errors.queueFull());
    }
    return new Promise<Tensor[]>((resolve, reject) => {
      const waiting: Waiting = { request, sequence: this.nextSequence++, level, resolve, reject, timer: undefined, delayed: false };
      const timeoutUs =
        request.timeoutMicroseconds > 0 && policy.allow_timeout_override
          ? request.timeoutMicroseconds
          : (policy.default_timeout_microseconds ?? 0);
      if (timeoutUs > 0) {
        const remainingMs = Number(request.arrivalNs + BigInt(timeoutUs) * 1000n - this.clock.nowNs()) / 1e6;
        waiting.timer = this.clock.setTimeout(() => this.onTimeout(waiting, policy), Math.max(0, remainingMs));
      }
      queue.push(waiting);
      this.queued++;
      this.noteArrival(request.arrivalNs);
      this.dispatch();
    });
  }

  drain(): Promise<void> {
    if (this.pendingCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private noteArrival(arrivalNs: bigint): void {
    if (this.lastArrivalNs !== undefined) {
      const gap = Math.max(0, Number(arrivalNs - this.lastArrivalNs));
      this.interArrivalNs = this.interArrivalNs === undefined ? gap : 0.8 * this.interArrivalNs + 0.2 * gap;
    }
    this.lastArrivalNs = arrivalNs;
  }

  private onTimeout(waiting: Waiting, policy: ModelQueuePolicy): void {
    waiting.timer = undefined;
    const queue = this.queues[waiting.level - 1]!;
    const index = queue.indexOf(waiting);
    if (index < 0) return;
    queue.splice(index, 1);
    if (policy.timeout_action === 'DELAY') {
      waiting.delayed = true;
      this.delayed.push(waiting);
      this.dispatch();
      return;
    }
    this.queued--;
    this.context.stats.recordFailure(waiting.request, 'REJECTED');
    this.skipDelivery(waiting.sequence);
    waiting.reject(Errors.requestTimeout());
    this.afterChange();
  }

  /** Requests in serving order: priority levels first to last, then the delayed ones. */
  private *inOrder(): Generator<Waiting> {
    for (const queue of this.queues) yield* queue;
    yield* this.delayed;
  }

  private dispatch(): void {
    if (this.delayTimer !== undefined) {
      this.clock.clearTimeout(this.delayTimer);
      this.delayTimer = undefined;
    }
    while (this.freeInstances.length > 0 && this.queued > 0) {
      const batch = this.options.dynamic ? this.formBatch() : [this.inOrder().next().value as Waiting];
      if (batch.length === 0) break;
      this.start(batch);
    }
    this.afterChange();
  }

  /** The batch to send now, or [] to wait (a delay timer is then set). */
  private formBatch(): Waiting[] {
    const { maxBatchSize, preferredBatchSizes, maxQueueDelayNs } = this.options;
    const candidates: Waiting[] = [];
    const sums: number[] = [];
    let size = 0;
    let blocked = false;
    for (const waiting of this.inOrder()) {
      const fits = size + waiting.request.batchSize <= maxBatchSize;
      if (!fits || (candidates.length > 0 && !sameShapes(candidates[0]!.request, waiting.request))) {
        blocked = true;
        break;
      }
      candidates.push(waiting);
      size += waiting.request.batchSize;
      sums.push(size);
    }
    if (candidates.length === 0) return [];
    if (size >= maxBatchSize || blocked) return candidates;
    // The largest preferred size that a prefix of the queue adds up to goes at once.
    for (const preferred of preferredBatchSizes) {
      const n = sums.indexOf(preferred);
      if (n >= 0) return candidates.slice(0, n + 1);
    }
    const oldest = candidates.reduce((a, b) => (a.request.arrivalNs < b.request.arrivalNs ? a : b));
    const now = this.clock.nowNs();
    const waitedNs = now - oldest.request.arrivalNs;
    if (waitedNs >= maxQueueDelayNs) return candidates;
    // "At most" max_queue_delay: when the next request is not expected before the delay ends
    // (a lone client, light traffic), waiting only adds latency, so the batch goes now.
    if (this.options.adaptiveDelay && this.interArrivalNs !== undefined && BigInt(Math.round(this.interArrivalNs)) > maxQueueDelayNs - waitedNs) {
      return candidates;
    }
    this.delayTimer = this.clock.setTimeout(() => {
      this.delayTimer = undefined;
      this.dispatch();
    }, Number(maxQueueDelayNs - waitedNs) / 1e6);
    return [];
  }

  private start(batch: Waiting[]): void {
    for (const waiting of batch) {
      const queue = waiting.delayed ? this.delayed : this.queues[waiting.level - 1]!;
      queue.splice(queue.indexOf(waiting), 1);
      if (waiting.timer !== undefined) this.clock.clearTimeout(waiting.timer);
    }
    this.queued -= batch.length;
    this.executing += batch.length;
    const instanceIndex = this.freeInstances.shift()!;
    void this.run(instanceIndex, batch).finally(() => {
      this.executing -= batch.length;
      this.freeInstances.push(instanceIndex);
      this.dispatch();
    });
  }

  private async run(instanceIndex: number, batch: Waiting[]): Promise<void> {
    const { instances, outputNames, stats } = this.context;
    const dispatchedNs = this.clock.nowNs();
    const sizes = batch.map((w) => w.request.batchSize);
    const total = sizes.reduce((a, b) => a + b, 0);
    let perRequest: Tensor[][];
    let timings;
    try {
      const inputs = assembleBatch(batch.map((w) => w.request.inputs), sizes);
      const result = await instances[instanceIndex]!.execute(inputs, outputNames);
      timings = result.timings;
      perRequest = splitOutputs(result.outputs, sizes);
    } catch (error) {
      const failure = toInferenceServerError(error);
      for (const waiting of batch) {
        stats.recordFailure(waiting.request, 'BACKEND');
        this.deliver(waiting.sequence, () => waiting.reject(failure));
      }
      return;
    }
    stats.recordExecution(total, timings);
    batch.forEach((waiting, i) => {
      stats.recordSuccess(waiting.request, Number(dispatchedNs - waiting.request.arrivalNs), timings);
      this.deliver(waiting.sequence, () => waiting.resolve(perRequest[i]!));
    });
  }

  /** With preserve_ordering, responses leave in arrival order; otherwise at once. */
  private deliver(sequence: number, settle: () => void): void {
    if (!this.options.preserveOrdering) {
      settle();
      return;
    }
    this.finished.set(sequence, settle);
    this.flushInOrder();
  }

  private skipDelivery(sequence: number): void {
    if (this.options.preserveOrdering) this.deliver(sequence, () => undefined);
  }

  private flushInOrder(): void {
    for (let next = this.finished.get(this.nextToDeliver); next; next = this.finished.get(this.nextToDeliver)) {
      this.finished.delete(this.nextToDeliver);
      this.nextToDeliver++;
      next();
    }
  }

  private afterChange(): void {
    this.context.stats.setPending(this.pendingCount);
    if (this.pendingCount === 0 && this.idleWaiters.length > 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }
}

/** Requests share a batch only when every input has the same non-batch dims. */
function sameShapes(a: QueuedRequest, b: QueuedRequest): boolean {
  for (let i = 0; i < a.inputs.length; i++) {
    const sa = a.inputs[i]!.shape;
    const sb = b.inputs[i]?.shape;
    if (!sb || sa.length !== sb.length) return false;
    for (let d = 1; d < sa.length; d++) if (sa[d] !== sb[d]) return false;
  }
  return true;
}
