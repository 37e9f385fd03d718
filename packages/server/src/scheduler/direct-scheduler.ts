import { toInferenceServerError } from '../core/errors.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { QueuedRequest, Scheduler, SchedulerContext } from './scheduler.ts';

interface Waiting {
  readonly request: QueuedRequest;
  resolve(outputs: Tensor[]): void;
  reject(error: Error): void;
}

/** Models without dynamic_batching: each request runs alone, on the next free instance, in arrival order. */
export class DirectScheduler implements Scheduler {
  private readonly queue: Waiting[] = [];
  private readonly freeInstances: number[];
  private executing = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly context: SchedulerContext) {
    this.freeInstances = context.instances.map((_, i) => i);
  }

  get pendingCount(): number {
    return this.queue.length + this.executing;
  }

  enqueue(request: QueuedRequest): Promise<Tensor[]> {
    return new Promise<Tensor[]>((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      this.dispatch();
    });
  }

  drain(): Promise<void> {
    if (this.pendingCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private dispatch(): void {
    while (this.freeInstances.length > 0 && this.queue.length > 0) {
      const instanceIndex = this.freeInstances.shift()!;
      const waiting = this.queue.shift()!;
      this.executing++;
      void this.run(instanceIndex, waiting).finally(() => {
        this.executing--;
        this.freeInstances.push(instanceIndex);
        this.dispatch();
        if (this.pendingCount === 0) {
          const waiters = this.idleWaiters;
          this.idleWaiters = [];
          for (const w of waiters) w();
        }
      });
    }
  }

  private async run(instanceIndex: number, { request, resolve, reject }: Waiting): Promise<void> {
    const { instances, outputNames, stats } = this.context;
    const startNs = process.hrtime.bigint();
    try {
      const result = await instances[instanceIndex]!.execute(request.inputs, outputNames);
      stats.recordExecution(request.batchSize, result.timings);
      stats.recordSuccess(request, Number(startNs - request.arrivalNs), result.timings);
      resolve(result.outputs);
    } catch (error) {
      stats.recordFailure(request, 'BACKEND');
      reject(toInferenceServerError(error));
    }
  }
}
