import type { ModelQueuePolicy } from '../config/model-config.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { BatchingOptions } from './batching-options.ts';
import type { QueuedRequest } from './scheduler.ts';
import { WaitingList, type Linked } from './waiting-list.ts';

/** A request in a queue, with the promise it settles. */
export interface Waiting extends Linked<Waiting> {
  readonly request: QueuedRequest;
  readonly level: PriorityLevel;
  readonly resolve: (outputs: Tensor[]) => void;
  readonly reject: (error: Error) => void;
  /** The queue-timeout timer while one is armed. */
  timer: unknown;
  /** Under a latency objective: the timer that refuses the request once it can no longer finish in time. */
  objectiveTimer?: unknown;
}

/** One priority level: its queue policy, its FIFO, and (DELAY action) its expired requests. */
export class PriorityLevel {
  readonly waiting = new WaitingList<Waiting>();
  /** Past their timeout under timeout_action DELAY: served after this level's requests still in time, as Triton does. */
  readonly delayed = new WaitingList<Waiting>();
  private readonly maxQueueSize: number;

  constructor(readonly policy: ModelQueuePolicy) {
    this.maxQueueSize = policy.max_queue_size ?? 0;
  }

  get full(): boolean {
    return this.maxQueueSize > 0 && this.waiting.length + this.delayed.length >= this.maxQueueSize;
  }

  /**
   * The queue timeout in microseconds, 0 for none, as Triton's PolicyQueue::Enqueue decides
   * it: a request may only shorten the default, so with no default timeout a request's own
   * timeout is ignored even when allow_timeout_override is set.
   */
  timeoutMicroseconds(request: QueuedRequest): number {
    const byDefault = this.policy.default_timeout_microseconds ?? 0;
    const own = request.timeoutMicroseconds;
    if (this.policy.allow_timeout_override && own !== 0 && own < byDefault) return own;
    return byDefault;
  }
}

/** The queues of one model version, one per priority level, level 1 served first. */
export class PriorityQueues {
  private readonly levels: PriorityLevel[];
  private count = 0;
  private sampleCount = 0;

  constructor(private readonly options: BatchingOptions) {
    this.levels = Array.from(
      { length: Math.max(1, options.priorityLevels) },
      (_, i) => new PriorityLevel(options.priorityQueuePolicy.get(i + 1) ?? options.defaultQueuePolicy),
    );
  }

  get size(): number {
    return this.count;
  }

  /** Samples (the requests' batch sizes) queued. */
  get samples(): number {
    return this.sampleCount;
  }

  /**
   * The level for a request's priority. As Triton's InferenceRequest::SetPriority: 0, or a
   * priority beyond priority_levels (any, when none are configured), means the default level.
   */
  levelOf(priority: number): PriorityLevel {
    const { priorityLevels, defaultPriorityLevel } = this.options;
    if (priority === 0 || priority > priorityLevels) return this.levels[defaultPriorityLevel - 1]!;
    return this.levels[priority - 1]!;
  }

  add(waiting: Waiting): void {
    waiting.level.waiting.push(waiting);
    this.count++;
    this.sampleCount += waiting.request.batchSize;
  }

  /** Takes a request out of whichever queue holds it; false when it is in none. */
  remove(waiting: Waiting): boolean {
    if (!waiting.list?.remove(waiting)) return false;
    this.count--;
    this.sampleCount -= waiting.request.batchSize;
    return true;
  }

  /** DELAY action: the request stays queued, behind every request of its level that is still in time. */
  delay(waiting: Waiting): void {
    if (waiting.level.waiting.remove(waiting)) waiting.level.delayed.push(waiting);
  }

  *inServingOrder(): Generator<Waiting> {
    for (const level of this.levels) {
      yield* level.waiting;
      yield* level.delayed;
    }
  }
}
