import type { RequestOutcome } from '../../backends/backend.ts';
import { sequenceControlsOf, sequenceStatesOf, type SequenceControls } from '../../config/sequence-batching.ts';
import { Errors, toInferenceServerError, type InferenceServerError } from '../../errors/errors.ts';
import type { SequenceFigures } from '../../metrics/version-series.ts';
import type { Parameters, Tensor } from '../../tensor/tensor.ts';
import { systemClock, type Clock } from '../clock.ts';
import type { QueuedRequest, Scheduler, SchedulerContext } from '../scheduler.ts';
import type { SlotSignal } from './control-tensors.ts';
import { DirectBatcher } from './direct-batcher.ts';
import {
  Sequence,
  type Backlog,
  type Prepared,
  type SequenceWaiting,
  type Slot,
  type SlotBatcher,
  type SlotHost,
} from './sequence-types.ts';
import { ImplicitStates } from './implicit-state.ts';
import { OldestBatcher } from './oldest-batcher.ts';

const keyOf = (id: bigint | string): string => (typeof id === 'string' ? `s${id}` : `n${id}`);

/**
 * Triton's sequence batcher (core sequence_batch_scheduler.cc): every request of a sequence runs on
 * the instance, and with `direct` in the batch slot, its first request was given; a sequence that
 * finds every slot taken waits in the backlog, first come first served, for a slot that its END (or
 * the idle timeout) frees. The control inputs tell the model each slot's START, END, READY and
 * CORRID; implicit state carries each sequence's state output to its next request. `direct`
 * (direct-batcher.ts) runs the instance's ready slots together, a null request in the slots
 * between; `oldest` (oldest-batcher.ts) gives each instance a dynamic batcher that takes one request
 * per candidate sequence at a time.
 */
export class SequenceScheduler implements Scheduler, SlotHost {
  private readonly sequences = new Map<string, Sequence>();
  private readonly backlogs: Backlog[] = [];
  /** Free slots, the lowest slot index first (then the lowest instance), as Triton hands them out. */
  private readonly free: Slot[] = [];
  private readonly batchers: SlotBatcher[];
  /** Every slot of every instance. */
  private readonly slots: Slot[] = [];
  readonly controls: SequenceControls;
  readonly states: ImplicitStates;
  /** What the instance is asked for: the config's outputs and the state outputs. */
  readonly outputNames: readonly string[];
  readonly batching: boolean;
  private readonly idleMs: number;
  private readonly idleNs: bigint;
  private stopping = false;
  private waitingCount = 0;
  private runningCount = 0;
  private slotsInUse = 0;
  private slotCount = 0;
  private idleReleases = 0;
  private stateBytes = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(
    readonly context: SchedulerContext,
    readonly clock: Clock = systemClock,
  ) {
    const { config } = context;
    const batcher = config.sequence_batching ?? {};
    this.batching = config.max_batch_size > 0;
    this.controls = sequenceControlsOf(config);
    this.states = new ImplicitStates(sequenceStatesOf(config), this.batching, config.name, context.initialStateFiles);
    this.outputNames = [...new Set([...context.outputNames, ...this.states.outputNames])];
    const idleUs = batcher.max_sequence_idle_microseconds || 1_000_000;
    this.idleNs = BigInt(idleUs) * 1000n;
    this.idleMs = idleUs / 1000;
    const maxBatchSize = Math.max(1, config.max_batch_size);
    const slotsPerInstance = batcher.oldest ? batcher.oldest.max_candidate_sequences || maxBatchSize : maxBatchSize;
    const slotsOf = (instance: number): Slot[] =>
      Array.from({ length: slotsPerInstance }, (_, index) => ({
        instance,
        index,
        sequence: undefined,
        queue: [],
        inFlight: false,
      }));
    this.batchers = context.instances.map((_, i) => {
      const slots = slotsOf(i);
      this.slotCount += slots.length;
      this.slots.push(...slots);
      this.free.push(...slots);
      return batcher.oldest ? new OldestBatcher(this, i) : new DirectBatcher(this, i, slots);
    });
    this.free.sort((a, b) => a.index - b.index || a.instance - b.instance);
    context.stats.observeSequences(() => this.figures());
  }

  get pendingCount(): number {
    return this.waitingCount + this.runningCount;
  }

  /** Requests queued, in slots and in the backlog (Triton's pending count). */
  get queuedCount(): number {
    return this.waitingCount;
  }

  enqueue(request: QueuedRequest): Promise<Tensor[]> {
    const model = this.context.config.name;
    if (request.batchSize > 1) {
      return this.refuse(
        request,
        Errors.invalidArg(`inference request to model '${model}' must specify batch-size 1 due to requirements of sequence batcher`),
      );
    }
    const given = request.sequence;
    if (!given || given.id === 0n || given.id === '') {
      return this.refuse(
        request,
        Errors.invalidArg(`inference request to model '${model}' must specify a non-zero or non-empty correlation ID`),
      );
    }
    if (this.stopping && given.start) {
      return this.refuse(
        request,
        Errors.unavailable('Server is stopping, scheduler for model has stopped accepting new inference requests'),
      );
    }
    const key = keyOf(given.id);
    let sequence = this.sequences.get(key);
    if (!sequence && !given.start) {
      return this.refuse(
        request,
        Errors.invalidArg(
          `inference request for sequence ${String(given.id)} to model '${model}' must specify the START flag on the first request of the sequence`,
        ),
      );
    }
    // A START for a sequence still in progress (its END never came, or two clients share an id) continues in its
    // slot or backlog, as Triton does: its state starts over when that request runs.
    const now = this.clock.nowNs();
    if (!sequence) {
      sequence = new Sequence(key, given.id, now);
      const slot = this.free[0];
      if (slot) {
        try {
          this.charge(sequence);
        } catch (error) {
          return this.refuse(request, error as InferenceServerError);
        }
        this.free.shift();
        this.assign(slot, sequence);
      } else {
        const backlog: Backlog = { sequence, queue: [], expiresAtNs: undefined, timer: undefined };
        sequence.backlog = backlog;
        this.backlogs.push(backlog);
      }
      this.sequences.set(key, sequence);
    }
    sequence.lastNs = now;
    this.armIdle(sequence);
    const target = sequence;
    return new Promise<Tensor[]>((resolve, reject) => {
      const waiting: SequenceWaiting = { request, sequence: target, start: given.start, end: given.end, resolve, reject };
      this.waitingCount++;
      // After its END, the id belongs to the next sequence that starts with it.
      if (given.end) {
        target.ended = true;
        this.forget(target);
      }
      if (target.slot) {
        target.slot.queue.push(waiting);
        this.batchers[target.slot.instance]!.wake(target.slot);
      } else {
        const backlog = target.backlog!;
        backlog.queue.push(waiting);
        if (request.timeoutMicroseconds > 0) this.expireBacklogAt(backlog, now + BigInt(request.timeoutMicroseconds) * 1000n);
      }
      this.publishPending();
    });
  }

  private refuse(request: QueuedRequest, error: InferenceServerError): Promise<never> {
    this.context.stats.recordFailure(request, 'REJECTED');
    return Promise.reject(error);
  }

  /** The id may start a new sequence: this one no longer takes requests without START. */
  private forget(sequence: Sequence): void {
    if (this.sequences.get(sequence.key) === sequence) this.sequences.delete(sequence.key);
  }

  /** Charges the sequence's initial state to the memory guard (throws over budget); nothing without implicit state. */
  private charge(sequence: Sequence): void {
    if (!this.states.any || !this.context.reserveMemory) return;
    const bytes = this.states.bytesOf(this.states.initial());
    sequence.memory = this.context.reserveMemory(bytes);
    sequence.memoryBytes = bytes;
    this.stateBytes += bytes;
  }

  private assign(slot: Slot, sequence: Sequence): void {
    slot.sequence = sequence;
    sequence.slot = slot;
    sequence.backlog = undefined;
    this.slotsInUse++;
  }

  /**
   * The slot's sequence is done with it (its END was taken, the idle timeout, a failed charge): its
   * state goes, and the oldest backlogged sequence takes the slot with the requests it has gathered.
   */
  private release(slot: Slot): void {
    const done = slot.sequence;
    if (done) {
      done.gone = true;
      done.slot = undefined;
      done.state = undefined;
      this.stateBytes -= done.memoryBytes;
      done.memory?.release();
      done.memory = undefined;
      done.memoryBytes = 0;
      this.clearIdle(done);
      slot.sequence = undefined;
      this.slotsInUse--;
    }
    for (let backlog = this.backlogs.shift(); backlog; backlog = this.backlogs.shift()) {
      if (backlog.timer !== undefined) this.clock.clearTimeout(backlog.timer);
      const { sequence } = backlog;
      try {
        this.charge(sequence);
      } catch (error) {
        this.forget(sequence);
        this.failAll(backlog.queue, error as Error);
        continue;
      }
      this.assign(slot, sequence);
      slot.queue.push(...backlog.queue);
      this.armIdle(sequence);
      this.batchers[slot.instance]!.wake(slot);
      return;
    }
    this.free.push(slot);
    this.free.sort((a, b) => a.index - b.index || a.instance - b.instance);
  }

  private failAll(queue: SequenceWaiting[], error: Error): void {
    for (const waiting of queue.splice(0)) {
      this.waitingCount--;
      this.context.stats.recordFailure(waiting.request, 'REJECTED');
      waiting.reject(error);
    }
    this.afterChange();
  }

  /** Triton's backlog expiry: a backlogged sequence whose request's timeout passes fails as a whole. */
  private expireBacklogAt(backlog: Backlog, atNs: bigint): void {
    if (backlog.expiresAtNs !== undefined && backlog.expiresAtNs <= atNs) return;
    backlog.expiresAtNs = atNs;
    if (backlog.timer !== undefined) this.clock.clearTimeout(backlog.timer);
    backlog.timer = this.clock.setTimeout(
      () => {
        const at = this.backlogs.indexOf(backlog);
        if (at < 0) return;
        this.backlogs.splice(at, 1);
        this.forget(backlog.sequence);
        this.clearIdle(backlog.sequence);
        this.failAll(backlog.queue, Errors.unavailable('timeout of the corresponding sequence has been expired'));
      },
      Math.max(0, Number(atNs - this.clock.nowNs()) / 1e6),
    );
  }

  private armIdle(sequence: Sequence): void {
    if (sequence.idleTimer !== undefined) return;
    const remainingMs = Math.max(0, Number(sequence.lastNs + this.idleNs - this.clock.nowNs()) / 1e6);
    sequence.idleTimer = this.clock.setTimeout(() => this.onIdle(sequence), remainingMs);
  }

  private clearIdle(sequence: Sequence): void {
    if (sequence.idleTimer !== undefined) this.clock.clearTimeout(sequence.idleTimer);
    sequence.idleTimer = undefined;
  }

  /**
   * max_sequence_idle_microseconds passed with nothing of the sequence queued or running (its idle
   * time, as model_config.proto defines it): its slot is freed, so that its next request without
   * START gets the START error. A sequence waiting in the backlog, or with requests in its slot, is
   * not idle.
   */
  private onIdle(sequence: Sequence): void {
    sequence.idleTimer = undefined;
    if (sequence.gone || sequence.ended) return;
    const slot = sequence.slot;
    const busy = !slot || slot.queue.length > 0 || slot.inFlight;
    const idleForNs = this.clock.nowNs() - sequence.lastNs;
    if (busy || idleForNs < this.idleNs) {
      const waitMs = busy ? this.idleMs : Number(this.idleNs - idleForNs) / 1e6;
      sequence.idleTimer = this.clock.setTimeout(() => this.onIdle(sequence), Math.max(0, waitMs));
      return;
    }
    this.forget(sequence);
    this.idleReleases++;
    this.release(slot);
  }

  /** Takes the slot's next request to run: an END frees the slot for the backlog at once (Triton's order). */
  take(slot: Slot): Prepared {
    const waiting = slot.queue.shift()!;
    this.waitingCount--;
    this.runningCount++;
    const { sequence } = waiting;
    // A START starts the state over; a sequence whose first request this is starts from the initial state.
    const state = !this.states.any ? [] : waiting.start || !sequence.state ? this.states.initial() : sequence.state;
    const signal: SlotSignal = { ready: true, start: waiting.start, end: waiting.end, id: sequence.id };
    if (waiting.end && slot.sequence === sequence) this.release(slot);
    this.publishPending();
    return { waiting, state, signal };
  }

  /** The request ran: its state output becomes the sequence's state, and its outputs (the config's) are its answer. */
  finish(prepared: Prepared, outputs: Tensor[]): void {
    const { waiting } = prepared;
    const { sequence } = waiting;
    this.runningCount--;
    if (this.states.any) {
      const byName = new Map(outputs.map((t) => [t.name, t]));
      if (!sequence.gone) {
        try {
          this.store(sequence, this.states.fromOutputs(byName, this.context.config.name));
        } catch (error) {
          waiting.reject(error as Error);
          this.afterChange();
          return;
        }
      }
      const answer = new Set(this.context.outputNames);
      outputs = outputs.filter((t) => answer.has(t.name));
    }
    waiting.resolve(outputs);
    this.afterChange();
  }

  private store(sequence: Sequence, state: Tensor[]): void {
    const bytes = this.states.bytesOf(state);
    if (sequence.memory && bytes > sequence.memoryBytes) {
      sequence.memory.grow(bytes - sequence.memoryBytes);
      this.stateBytes += bytes - sequence.memoryBytes;
      sequence.memoryBytes = bytes;
    }
    sequence.state = state;
  }

  fail(prepared: Prepared, error: Error): void {
    this.runningCount--;
    prepared.waiting.reject(error);
    this.afterChange();
  }

  /** A slot's running request is done (answered or failed): the sequence's idle time starts when nothing of it is left. */
  slotDone(slot: Slot): void {
    slot.inFlight = false;
    if (slot.sequence && slot.queue.length === 0) slot.sequence.lastNs = this.clock.nowNs();
  }

  /** A JavaScript model's request parameters: the client's, with the sequence's id and flags always there. */
  parametersOf(waiting: SequenceWaiting): Parameters {
    const id = waiting.sequence.id;
    const sequenceId = typeof id === 'string' || id > BigInt(Number.MAX_SAFE_INTEGER) ? String(id) : Number(id);
    return { ...waiting.request.parameters, sequence_id: sequenceId, sequence_start: waiting.start, sequence_end: waiting.end };
  }

  /** Answers each request of a batch by its outcome (an instance that runs requests on their own). */
  settle(prepared: readonly Prepared[], outcomes: readonly RequestOutcome[]): void {
    prepared.forEach((p, i) => {
      const outcome = outcomes[i]!;
      if ('outputs' in outcome) this.finish(p, outcome.outputs);
      else this.fail(p, toInferenceServerError('error' in outcome ? outcome.error : 'a sequence model answers each request once'));
    });
  }

  drain(): Promise<void> {
    if (this.pendingCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  stop(): void {
    this.stopping = true;
  }

  close(): void {
    this.stopping = true;
    for (const batcher of this.batchers) batcher.close();
    for (const backlog of this.backlogs) if (backlog.timer !== undefined) this.clock.clearTimeout(backlog.timer);
    for (const sequence of this.sequences.values()) this.clearIdle(sequence);
    this.sequences.clear();
    // The version is gone, and with it its sequences and what their states held.
    for (const slot of this.slots) {
      const sequence = slot.sequence;
      if (!sequence) continue;
      sequence.gone = true;
      this.clearIdle(sequence);
      sequence.memory?.release();
    }
    this.stateBytes = 0;
    this.context.gate?.close();
  }

  figures(): SequenceFigures {
    return {
      active: this.slotsInUse + this.backlogs.length,
      backlog: this.backlogs.length,
      slotsInUse: this.slotsInUse,
      slots: this.slotCount,
      idleReleases: this.idleReleases,
      stateBytes: this.stateBytes,
    };
  }

  publishPending(): void {
    let queued = this.waitingCount;
    for (const batcher of this.batchers) queued += batcher.queued ?? 0;
    this.context.stats.setPending(queued);
  }

  afterChange(): void {
    this.publishPending();
    if (this.pendingCount === 0 && this.idleWaiters.length > 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }
}
