import type { ExecutionResult, ExecutionTimings, InstanceRequest, ModelInstance, RequestOutcome, StreamEnd } from '../backends/backend.ts';
import type { Parameters as RequestParameters } from '../tensor/tensor.ts';
import { GpuOutOfMemoryError } from '../backends/gpu-oom.ts';
import { Errors, toInferenceServerError, type InferenceServerError } from '../errors/errors.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { assembleBatch, splitOutputs } from './batch-assembly.ts';
import { ArrivalGap } from './arrival-gap.ts';
import { populationOf, RecentWindow } from './recent-window.ts';
import { chooseBatch, type BatchChoice, type Company } from './batch-choice.ts';
import { batchingOptionsFromConfig, type BatchingOptions } from './batching-options.ts';
import { systemClock, type Clock } from './clock.ts';
import { OrderedDelivery } from './ordered-delivery.ts';
import { PriorityQueues, type Waiting } from './priority-queues.ts';
import type { ObjectiveRefusal, QueuedRequest, Scheduler, SchedulerContext } from './scheduler.ts';
import { markCompute } from '../trace/tracer.ts';
import { ObjectiveBatcher } from './objective-batcher.ts';
import { RefusalTimer } from './refusal-timer.ts';
import { offAbort, onAbort } from '../protocol/abort-listeners.ts';

/**
 * Queues of one model version and the instances that serve them. With dynamic batching,
 * batches form as Triton's dynamic batcher forms them (see batch-choice.ts), with priority
 * levels, queue policies (size limit; timeouts that fire on time even while every instance
 * is busy, REJECT or DELAY) and optional ordering. Without it each request runs alone, in
 * arrival order. A batch forms only when an instance is free, so batches grow while all
 * instances are busy.
 *
 * Batches form at the end of an event-loop turn (Clock.defer: setImmediate), once per turn
 * however many requests arrive and instances free up in it. Requests decoded in the same
 * turn (a burst read from many sockets at once, or arriving while a batch completes) join one
 * batch, as Triton's batcher thread, when woken, takes everything queued by then; dispatching
 * at once would send the first alone to the idle instance and make the rest wait for it.
 * This waits for no timer: a lone request leaves in the loop iteration it arrived in (the
 * check phase, right after I/O), so max_queue_delay 0 and models without dynamic batching
 * still send as soon as an instance is free. max_queue_delay and queue-timeout timers act
 * when they fire. Requests waiting for the end of the turn count towards max_queue_size, but
 * one that finds its level full while a dispatch is pending lets that dispatch run first: a
 * request is refused only when no free instance could take from the queue.
 */
export class BatchingScheduler implements Scheduler {
  private readonly queues: PriorityQueues;
  private readonly freeInstances: number[];
  private readonly ordered: OrderedDelivery | undefined;
  private readonly arrivals: ArrivalGap | undefined;
  /** With the adaptive delay: the requests held at once (queued and executing) at the last arrivals. */
  private readonly held: RecentWindow<number> | undefined;
  /** With batchwise_latency_objective_ms: batches form to keep it, and requests that would miss it are refused. */
  private readonly objective: ObjectiveBatcher | undefined;
  /** With an objective: its refusals, each answered at its request's deadline, on one timer. */
  private readonly refusals: RefusalTimer | undefined;
  /** The queues in serving order, as an iterable that can be walked more than once. */
  private readonly servingOrder: Iterable<Waiting> = { [Symbol.iterator]: () => this.queues.inServingOrder() };
  /** The options and the instances' room for strings, as chooseBatch takes them. */
  private readonly rule: Parameters<typeof chooseBatch>[1];
  private objectiveRefusal: InferenceServerError | undefined;
  /** Some queue policy keeps late requests (timeout_action DELAY): the objective sheds none of its level's. */
  private readonly anyLevelDelays: boolean;
  private executing = 0;
  /** Dispatch to completion of the last batch, for the adaptive delay. */
  private lastBatchNs: bigint | undefined;
  private delayTimer: unknown;
  /** The instance waiting for the rate limiter's grant (at most one at a time), and since when. */
  private awaitingGrant: { readonly instanceIndex: number; readonly sinceNs: bigint } | undefined;
  private idleWaiters: (() => void)[] = [];
  /** A dispatch is deferred to the end of this event-loop turn (at most one at a time). */
  private dispatchDeferred = false;
  private readonly deferredDispatch = (): void => {
    this.dispatchDeferred = false;
    this.dispatch();
  };

  constructor(
    private readonly context: SchedulerContext,
    private readonly options: BatchingOptions = batchingOptionsFromConfig(context.config),
    private readonly clock: Clock = systemClock,
  ) {
    this.queues = new PriorityQueues(options);
    this.freeInstances = context.instances.map((_, i) => i);
    this.ordered = options.preserveOrdering ? new OrderedDelivery() : undefined;
    if (options.dynamic && options.latencyObjectiveNs !== undefined) {
      const objective = new ObjectiveBatcher(options.latencyObjectiveNs, context.instances.length, options.maxBatchSize, clock);
      for (const run of context.warmupRuns ?? []) objective.observeRun(run.instance, run.batchSize, run.ns, run.computeNs);
      context.stats.observeLatencyObjective(() => objective.statistics(clock.nowNs(), clock.lagNs()));
      this.objective = objective;
      this.refusals = new RefusalTimer(clock);
    }
    this.arrivals = options.dynamic && options.adaptiveDelay && !this.objective ? new ArrivalGap() : undefined;
    this.held = this.arrivals && new RecentWindow<number>(POPULATION_WINDOW);
    this.rule = { ...options, maxBatchStringHeapBytes: context.maxBatchStringHeapBytes ?? Infinity };
    this.anyLevelDelays = [options.defaultQueuePolicy, ...options.priorityQueuePolicy.values()].some((p) => p.timeout_action === 'DELAY');
  }

  get pendingCount(): number {
    return this.queues.size + this.executing;
  }

  /** Requests queued, not executing. */
  get queuedCount(): number {
    return this.queues.size;
  }

  shedOnArrival(samples: number, arrivalNs: bigint): ObjectiveRefusal | undefined {
    const objective = this.objective;
    // Any level that keeps late requests (DELAY) may be this request's: only its body would tell.
    if (!objective || this.anyLevelDelays) return undefined;
    if (!this.refusesLate(objective, this.expectedLatencyNs(objective, samples, arrivalNs), samples)) return undefined;
    this.shed({ arrivalNs }, 'admission');
    return { error: this.objectiveMiss(objective), answerAtNs: arrivalNs + objective.objectiveNs };
  }

  /** One error for every refusal of the objective: under overload there are thousands a second, and each new Error takes a stack trace. */
  private objectiveMiss(objective: ObjectiveBatcher): InferenceServerError {
    return (this.objectiveRefusal ??= Errors.latencyObjectiveMiss(this.context.config.name, objective.objectiveMs));
  }

  /** What a request of `samples` that arrived at `arrivalNs` is expected to take, queued behind what waits now. */
  private expectedLatencyNs(objective: ObjectiveBatcher, samples: number, arrivalNs: bigint): number | undefined {
    return objective.expectedLatencyNs(this.servingOrder, this.queues.samples, samples, arrivalNs, this.clock.nowNs(), this.clock.lagNs());
  }

  /** The objective's admission test: false for a request that would start at once, or is expected in time. */
  private refusesLate(objective: ObjectiveBatcher, expectedLatencyNs: number | undefined, samples: number): boolean {
    // A request that would start at once on a free instance is never shed: refusing it spares no one, and its
    // run refreshes a profile that may overestimate (a slow first run would otherwise refuse every request).
    const startsAtOnce = this.queues.size === 0 && this.freeInstances.length > 0;
    return !startsAtOnce && !objective.admits(expectedLatencyNs, this.queues.samples + objective.runningSamples, samples);
  }

  private shed(request: { readonly arrivalNs: bigint }, where: 'admission' | 'queued'): void {
    this.objective!.countShed(where);
    this.context.stats.recordObjectiveShed(request, where);
  }

  enqueue(request: QueuedRequest): Promise<Tensor[]> {
    if (request.signal?.aborted) {
      this.context.stats.recordFailure(request, 'CANCELED');
      return Promise.reject(Errors.cancelled());
    }
    const level = this.queues.levelOf(request.priority);
    // A free instance takes its batch now rather than let this request be refused.
    if (level.full && this.dispatchDeferred) this.dispatch();
    if (level.full) {
      this.context.stats.recordFailure(request, 'REJECTED');
      return Promise.reject(Errors.queueFull());
    }
    const objective = this.objective;
    const keep = level.policy.timeout_action === 'DELAY';
    const expectedNs = objective && this.expectedLatencyNs(objective, request.batchSize, request.arrivalNs);
    if (objective) {
      if (!keep && this.refusesLate(objective, expectedNs, request.batchSize)) {
        this.shed(request, 'admission');
        return new Promise((_, reject) => this.refuseAtDeadline(objective, request.arrivalNs, reject));
      }
      // Only what is admitted arrives for the batcher: refused requests never join a batch, and counting them
      // (thousands a second when clients resend at once) made it wait for company that never came (issue 30).
      objective.noteArrival(request.arrivalNs);
    }
    return new Promise<Tensor[]>((resolve, reject) => {
      const waiting = new QueuedWaiting(request, level, resolve, reject, this);
      // A client that goes away takes its queued request out of the queue at once.
      if (request.signal) onAbort(request.signal, waiting);
      const timeoutUs = level.timeoutMicroseconds(request);
      if (timeoutUs > 0) {
        const remainingNs = request.arrivalNs + BigInt(timeoutUs) * 1000n - this.clock.nowNs();
        waiting.timer = this.clock.setTimeout(() => this.onTimeout(waiting), Math.max(0, Number(remainingNs) / 1e6));
      }
      const giveUpAtNs =
        objective && !keep
          ? objective.giveUpAtNs(request.arrivalNs, objective.joinedBatchSamples(this.queues.samples, request.batchSize))
          : undefined;
      if (giveUpAtNs !== undefined && giveUpAtNs > this.clock.nowNs()) {
        const remainingMs = Number(giveUpAtNs - this.clock.nowNs()) / 1e6;
        waiting.objectiveTimer = this.clock.setTimeout(() => this.onObjectiveMissed(waiting), Math.max(0, remainingMs));
      }
      this.queues.add(waiting);
      this.arrivals?.note(request.arrivalNs);
      this.held?.note(this.executing + this.queues.size);
      this.context.stats.setPending(this.queues.size);
      this.dispatchAtEndOfTurn();
    });
  }

  drain(): Promise<void> {
    if (this.pendingCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private onTimeout(waiting: Waiting): void {
    waiting.timer = undefined;
    if (waiting.level.policy.timeout_action === 'DELAY') {
      this.queues.delay(waiting);
      this.dispatch();
      return;
    }
    if (!this.queues.remove(waiting)) return;
    if (waiting.objectiveTimer !== undefined) this.clock.clearTimeout(waiting.objectiveTimer);
    this.context.stats.recordFailure(waiting.request, 'REJECTED');
    waiting.reject(Errors.requestTimeout());
    this.afterChange();
  }

  /** Its client went away while it waited (QueuedWaiting's abort listener): it leaves the queue now, and never runs. */
  onCancelled(waiting: Waiting): void {
    if (!this.queues.remove(waiting)) return;
    if (waiting.timer !== undefined) this.clock.clearTimeout(waiting.timer);
    if (waiting.objectiveTimer !== undefined) this.clock.clearTimeout(waiting.objectiveTimer);
    this.context.stats.recordFailure(waiting.request, 'CANCELED');
    waiting.reject(Errors.cancelled());
    this.afterChange();
  }

  /**
   * A queued request that can no longer finish within the latency objective leaves the queue now,
   * and is refused at its deadline (ObjectiveRefusal says why), never answered late.
   */
  private onObjectiveMissed(waiting: Waiting): void {
    waiting.objectiveTimer = undefined;
    if (!this.queues.remove(waiting)) return;
    if (waiting.timer !== undefined) this.clock.clearTimeout(waiting.timer);
    const objective = this.objective!;
    this.shed(waiting.request, 'queued');
    this.refuseAtDeadline(objective, waiting.request.arrivalNs, (error) => waiting.reject(error));
    this.afterChange();
  }

  /** Rejects with the objective's refusal at the request's deadline, its arrival + the objective. */
  private refuseAtDeadline(objective: ObjectiveBatcher, arrivalNs: bigint, reject: (error: Error) => void): void {
    const error = this.objectiveMiss(objective);
    this.refusals!.at(arrivalNs + objective.objectiveNs, () => reject(error));
  }

  /** Coalesced: one dispatch at the end of the turn, only when an instance is free and a request waits. */
  private dispatchAtEndOfTurn(): void {
    if (this.dispatchDeferred || this.freeInstances.length === 0 || this.queues.size === 0) return;
    this.dispatchDeferred = true;
    this.clock.defer(this.deferredDispatch);
  }

  private dispatch(): void {
    if (this.delayTimer !== undefined) {
      this.clock.clearTimeout(this.delayTimer);
      this.delayTimer = undefined;
    }
    while (this.freeInstances.length > 0 && this.queues.size > 0 && this.awaitingGrant === undefined) {
      const choice = this.choose(this.freeInstances[0]!);
      if ('waitNs' in choice) {
        this.delayTimer = this.clock.setPreciseTimeout(() => {
          this.delayTimer = undefined;
          this.dispatch();
        }, choice.waitNs);
        break;
      }
      if (choice.count === 0) break;
      const instanceIndex = this.freeInstances.shift()!;
      if (this.context.gate) {
        if (!this.context.gate.acquire(instanceIndex, () => this.onGrant(instanceIndex))) {
          // The batch forms when the grant comes, so it grows meanwhile; its requests keep their deadlines.
          this.awaitingGrant = { instanceIndex, sinceNs: this.clock.nowNs() };
          break;
        }
        this.context.stats.recordRateLimiterWait(0);
      }
      this.start(instanceIndex, this.take(choice.count));
    }
    this.afterChange();
  }

  /** The rate limiter granted the waiting instance its resources: the batch forms now, from what waits now. */
  private onGrant(instanceIndex: number): void {
    const waited = this.awaitingGrant;
    this.awaitingGrant = undefined;
    if (waited) this.context.stats.recordRateLimiterWait(Number(this.clock.nowNs() - waited.sinceNs));
    const choice = this.queues.size === 0 ? { count: 0 } : this.choose(instanceIndex);
    if ('waitNs' in choice || choice.count === 0) {
      // Its requests timed out meanwhile (or too few are left to go yet): the resources go back.
      this.context.gate!.release(instanceIndex);
      this.freeInstances.unshift(instanceIndex);
      this.dispatch();
      return;
    }
    this.start(instanceIndex, this.take(choice.count));
    this.dispatch();
  }

  /** The next batch for the instance: alone without dynamic batching, by the latency objective, or Triton's choice. */
  private choose(instanceIndex: number): BatchChoice {
    if (!this.options.dynamic) return { count: 1 };
    if (this.objective) return this.chooseForObjective(this.objective, instanceIndex);
    return chooseBatch(this.queues.inServingOrder(), this.rule, this.clock.nowNs(), this.company());
  }

  /**
   * The objective's batch for a free instance, once the queued requests that the batch now forming
   * would finish late have left the queue (refused at their deadlines, as a request that can no
   * longer make it alone is): the requests it answers are answered in time. Without this a run that
   * took longer than expected made every request queued behind it late, and they were answered late
   * (issue 44).
   */
  private chooseForObjective(objective: ObjectiveBatcher, instanceIndex: number): BatchChoice {
    const nowNs = this.clock.nowNs();
    for (const waiting of objective.lateInBatch(this.servingOrder, nowNs, instanceIndex, this.clock.lagNs(), isShedding)) {
      if (waiting.objectiveTimer !== undefined) this.clock.clearTimeout(waiting.objectiveTimer);
      this.onObjectiveMissed(waiting);
    }
    return objective.choose(this.servingOrder, this.rule, nowNs, instanceIndex);
  }

  private company(): Company | undefined {
    // Without a delay nothing waits for company: spare the request path the population's walk.
    if (!this.arrivals || this.options.maxQueueDelayNs === 0n) return undefined;
    return {
      expectedArrivalGapNs: this.arrivals.expectedNs,
      lastBatchNs: this.lastBatchNs,
      idle: this.executing === 0,
      population: this.held && populationOf(this.held),
    };
  }

  /** Takes the first `count` requests in serving order out of the queues. */
  private take(count: number): Waiting[] {
    const batch: Waiting[] = [];
    for (const waiting of this.queues.inServingOrder()) {
      if (batch.length === count) break;
      batch.push(waiting);
    }
    for (const waiting of batch) {
      this.queues.remove(waiting);
      if (waiting.timer !== undefined) this.clock.clearTimeout(waiting.timer);
      if (waiting.objectiveTimer !== undefined) this.clock.clearTimeout(waiting.objectiveTimer);
    }
    return batch;
  }

  private start(instanceIndex: number, batch: Waiting[]): void {
    this.executing += batch.length;
    const tickets = this.ordered ? batch.map(() => this.ordered!.ticket()) : undefined;
    const instance = this.context.instances[instanceIndex]!;
    const dispatchedNs = this.clock.nowNs();
    let samples = 0;
    for (const waiting of batch) samples += waiting.request.batchSize;
    this.objective?.started(instanceIndex, samples, dispatchedNs);
    const run: BatchRun = { instanceIndex, batch, tickets, dispatchedNs, samples };
    if (instance.executeNow && !instance.executeRequests) {
      // An instance on the event loop: the batch runs and is answered in this call (issue 44).
      let result: ExecutionResult;
      try {
        result = instance.executeNow(assembleBatch(inputsOf(batch), sizesOf(batch)), this.context.outputNames);
      } catch (error) {
        this.finishFailed(run, error);
        return;
      }
      this.finish(run, { outcomes: splitOutputs(result.outputs, sizesOf(batch)).map((outputs) => ({ outputs })), timings: result.timings });
      return;
    }
    (instance.executeRequests ? this.runRequests(instance, batch) : this.runBatch(instance, batch)).then(
      (result) => this.finish(run, result),
      (error: unknown) => this.finishFailed(run, error),
    );
  }

  /** A batch's run failed: every request of it fails, and the instance is free. */
  private finishFailed(run: BatchRun, error: unknown): void {
    const { instanceIndex, batch, tickets } = run;
    try {
      this.objective?.finished(instanceIndex, this.clock.nowNs(), undefined);
      const failure = toInferenceServerError(error);
      // Recorded here, where the run failed: every request of the batch failed with the GPU's out-of-memory.
      const gpuOutOfMemory = error instanceof GpuOutOfMemoryError;
      for (let i = 0; i < batch.length; i++) {
        if (gpuOutOfMemory) this.context.stats.recordGpuOutOfMemory();
        this.settle(batch, i, tickets, this.failed(batch[i]!.request, failure));
      }
    } finally {
      this.release(instanceIndex, batch.length);
    }
  }

  /**
   * A batch ran: its requests are settled and the instance is free. A decoupled model's requests are
   * settled when each ends, which may be after the batch returned: the instance is free meanwhile.
   */
  private finish(run: BatchRun, result: { outcomes: RequestOutcome[]; timings: ExecutionTimings }): void {
    const { instanceIndex, batch, tickets, dispatchedNs, samples } = run;
    let open = 0;
    try {
      const { outcomes, timings } = result;
      this.lastBatchNs = this.clock.nowNs() - dispatchedNs;
      if (this.objective) this.objectiveFinished(this.objective, instanceIndex, timings, batch);
      this.context.stats.recordExecution(samples, timings);
      for (let i = 0; i < batch.length; i++) {
        const waiting = batch[i]!;
        const outcome = outcomes[i]!;
        if ('ended' in outcome) {
          open++;
          if (tickets) this.ordered!.settle(tickets[i]!, () => undefined);
          void outcome.ended.then((end) => this.streamEnded(waiting, end, dispatchedNs, timings));
          continue;
        }
        if ('error' in outcome || waiting.request.signal?.aborted) {
          this.settle(batch, i, tickets, this.failed(waiting.request, 'error' in outcome ? outcome.error : Errors.cancelled()));
          continue;
        }
        this.context.stats.recordSuccess(waiting.request, Number(dispatchedNs - waiting.request.arrivalNs), timings);
        if (waiting.request.trace) markCompute(waiting.request.trace, dispatchedNs, timings);
        this.settle(batch, i, tickets, outcome);
      }
    } finally {
      this.release(instanceIndex, batch.length - open);
    }
  }

  /**
   * A batch of the objective's ended: the next batch goes to the instance before this one's replies
   * are written. Its requests settle in this call, and each reply (split, encoded, written to its
   * socket) runs in a promise job behind the dispatch queued here, where the dispatch at the end of
   * the turn left the instance idle through all of them (at 64 clients about a millisecond for a
   * batch of 16, a quarter of its run), and every request of the next batch that much later (issue 44).
   */
  private objectiveFinished(
    objective: ObjectiveBatcher,
    instanceIndex: number,
    timings: ExecutionTimings,
    batch: readonly Waiting[],
  ): void {
    objective.finished(instanceIndex, this.clock.nowNs(), computeNsOf(timings), oldestArrivalNs(batch), this.clock.lagNs());
    queueMicrotask(() => this.dispatch());
  }

  /** A request that failed: counted CANCELED (answered as cancelled) when its client went away, else BACKEND. */
  private failed(request: QueuedRequest, error: Error): { error: Error } {
    const cancelled = request.signal?.aborted === true;
    this.context.stats.recordFailure(request, cancelled ? 'CANCELED' : 'BACKEND');
    return { error: cancelled ? Errors.cancelled() : error };
  }

  /**
   * A decoupled request ended (its responses went to its sink): counted, and its enqueue settled. One its
   * model finished (its final flag sent) is not cancelled by its client going away afterwards, even before
   * the batch returned: a cancellation that came first ended it with an error.
   */
  private streamEnded(waiting: Waiting, end: StreamEnd, dispatchedNs: bigint, timings: ExecutionTimings): void {
    const { request } = waiting;
    if (end.error) {
      waiting.reject(this.failed(request, end.error).error);
    } else {
      if (end.sentError) this.context.stats.recordFailure(request, 'BACKEND');
      else {
        this.context.stats.recordSuccess(request, Number(dispatchedNs - request.arrivalNs), timings);
        if (request.trace) markCompute(request.trace, dispatchedNs, timings);
      }
      waiting.resolve([]);
    }
    this.executing--;
    this.afterChange();
  }

  /** One assembled batch: one contiguous buffer per input, outputs split back into each request's rows. */
  private async runBatch(
    instance: ModelInstance,
    batch: readonly Waiting[],
  ): Promise<{ outcomes: RequestOutcome[]; timings: ExecutionTimings }> {
    const sizes = sizesOf(batch);
    const result = await instance.execute(assembleBatch(inputsOf(batch), sizes), this.context.outputNames);
    return { outcomes: splitOutputs(result.outputs, sizes).map((outputs) => ({ outputs })), timings: result.timings };
  }

  /** Each request with its own inputs, answered on its own (an error fails that request alone). */
  private async runRequests(
    instance: ModelInstance,
    batch: readonly Waiting[],
  ): Promise<{ outcomes: RequestOutcome[]; timings: ExecutionTimings }> {
    const result = await instance.executeRequests!(batch.map(({ request }) => this.instanceRequest(request)));
    const outcomes = result.responses.map((outcome) => ('error' in outcome ? { error: toInferenceServerError(outcome.error) } : outcome));
    return { outcomes, timings: result.timings };
  }

  /** What an instance that runs each request on its own gets of a request: optional fields only when present (no spread objects per request). */
  private instanceRequest(request: QueuedRequest): InstanceRequest {
    const sent: { -readonly [K in keyof InstanceRequest]: InstanceRequest[K] } = {
      inputs: request.inputs,
      outputNames: request.outputNames ?? this.context.outputNames,
      parameters: request.parameters ?? NO_PARAMETERS,
    };
    if (request.id !== undefined) sent.id = request.id;
    if (request.signal) sent.signal = request.signal;
    if (request.responses) sent.responses = request.responses;
    if (request.trace) {
      sent.caller = { parentTraceId: request.trace.id, ...(request.trace.context && { traceContext: request.trace.context }) };
    }
    return sent;
  }

  private settle(
    batch: readonly Waiting[],
    i: number,
    tickets: number[] | undefined,
    outcome: { readonly outputs: Tensor[] } | { readonly error: Error },
  ): void {
    const waiting = batch[i]!;
    if (tickets) {
      this.ordered!.settle(tickets[i]!, 'error' in outcome ? () => waiting.reject(outcome.error) : () => waiting.resolve(outcome.outputs));
    } else if ('error' in outcome) waiting.reject(outcome.error);
    else waiting.resolve(outcome.outputs);
  }

  /** The instance is free again: the next batch forms at the end of this turn. */
  private release(instanceIndex: number, requests: number): void {
    this.executing -= requests;
    const gate = this.context.gate;
    if (gate && this.awaitingGrant === undefined && this.queues.size > 0) {
      // Still work to do: ask again as the resources go back, competing by priority with other models.
      this.awaitingGrant = { instanceIndex, sinceNs: this.clock.nowNs() };
      gate.release(instanceIndex, () => this.onGrant(instanceIndex));
    } else {
      gate?.release(instanceIndex);
      this.freeInstances.push(instanceIndex);
      this.dispatchAtEndOfTurn();
    }
    this.afterChange();
  }

  close(): void {
    this.context.gate?.close();
  }

  private afterChange(): void {
    if (this.awaitingGrant && this.queues.size === 0) {
      // Nothing left to run: stop waiting for resources.
      this.context.gate!.cancel(this.awaitingGrant.instanceIndex);
      this.freeInstances.unshift(this.awaitingGrant.instanceIndex);
      this.awaitingGrant = undefined;
    }
    this.context.stats.setPending(this.queues.size);
    if (this.pendingCount === 0 && this.idleWaiters.length > 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }
}

/** Arrivals the population spans: two returns of a closed-loop pool that comes back in one or two bursts a batch. */
const POPULATION_WINDOW = 32;

/** Whether the objective may shed a queued request: not one its level keeps late (timeout_action DELAY). */
const isShedding = (waiting: Waiting): boolean => waiting.level.policy.timeout_action !== 'DELAY';

const NO_PARAMETERS: RequestParameters = Object.freeze({});

/** A batch on its instance, from its dispatch to its answers. */
interface BatchRun {
  readonly instanceIndex: number;
  readonly batch: readonly Waiting[];
  readonly tickets: number[] | undefined;
  readonly dispatchedNs: bigint;
  readonly samples: number;
}

const sizesOf = (batch: readonly Waiting[]): number[] => batch.map((w) => w.request.batchSize);
const inputsOf = (batch: readonly Waiting[]): (readonly Tensor[])[] => batch.map((w) => w.request.inputs);

/**
 * A request in the queues until it is answered. It is its own abort listener (handleEvent), and it
 * stops listening when it settles: one object a request, no closures (issue 34).
 */
class QueuedWaiting implements Waiting {
  timer: unknown = undefined;
  objectiveTimer?: unknown;
  prev: Waiting | undefined = undefined;
  next: Waiting | undefined = undefined;
  list: Waiting['list'] = undefined;

  constructor(
    readonly request: QueuedRequest,
    readonly level: Waiting['level'],
    private readonly settleResolve: (outputs: Tensor[]) => void,
    private readonly settleReject: (error: Error) => void,
    private readonly scheduler: { onCancelled(waiting: Waiting): void },
  ) {}

  resolve(outputs: Tensor[]): void {
    if (this.request.signal) offAbort(this.request.signal, this);
    this.settleResolve(outputs);
  }

  reject(error: Error): void {
    if (this.request.signal) offAbort(this.request.signal, this);
    this.settleReject(error);
  }

  handleEvent(): void {
    this.scheduler.onCancelled(this);
  }
}

/** What an instance reports of a run's own time: its input, compute and output phases. */
function computeNsOf(timings: ExecutionTimings): number {
  return timings.computeInputNs + timings.computeInferNs + timings.computeOutputNs;
}

function oldestArrivalNs(batch: readonly Waiting[]): bigint {
  let oldest = batch[0]!.request.arrivalNs;
  for (const waiting of batch) if (waiting.request.arrivalNs < oldest) oldest = waiting.request.arrivalNs;
  return oldest;
}
