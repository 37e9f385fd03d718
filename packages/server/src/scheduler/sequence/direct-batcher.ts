import type { ExecutionTimings, ModelInstance } from '../../backends/backend.ts';
import { GpuOutOfMemoryError } from '../../backends/gpu-oom.ts';
import { toInferenceServerError } from '../../errors/errors.ts';
import { elementCount } from '../../tensor/shape.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { markCompute } from '../../trace/tracer.ts';
import { assembleBatch, splitOutputs } from '../batch-assembly.ts';
import { controlTensors, NOT_READY } from './control-tensors.ts';
import type { Prepared, Slot, SlotBatcher, SlotHost } from './sequence-types.ts';

/**
 * The `direct` strategy on one instance (Triton's DirectSequenceBatch): each sequence keeps its
 * batch slot, and a batch holds the next request of every ready slot, up to the highest, with a
 * null request (READY false, zeros, a state of zeros) in each slot between that has none, so that
 * every request stays in its slot's row. A batch forms when the instance is free, at the end of the
 * event-loop turn (requests of one turn run together); with `max_queue_delay_microseconds` and
 * `minimum_slot_utilization` both set, it waits until that share of the slots is ready or its
 * oldest request has waited the delay. A slot whose request has other shapes than the batch's
 * first gets a null request and runs in the next batch (no ragged batching).
 */
export class DirectBatcher implements SlotBatcher {
  private running = false;
  private deferred = false;
  private delayTimer: unknown;
  private awaitingGrant = false;
  private readonly maxQueueDelayNs: bigint;
  private readonly minimumSlotUtilization: number;
  private closed = false;

  constructor(
    private readonly host: SlotHost,
    private readonly instanceIndex: number,
    private readonly slots: readonly Slot[],
  ) {
    const direct = host.context.config.sequence_batching?.direct;
    this.maxQueueDelayNs = BigInt(direct?.max_queue_delay_microseconds ?? 0) * 1000n;
    this.minimumSlotUtilization = direct?.minimum_slot_utilization ?? 0;
  }

  private get instance(): ModelInstance {
    return this.host.context.instances[this.instanceIndex]!;
  }

  wake(): void {
    if (this.deferred || this.running || this.closed) return;
    this.deferred = true;
    this.host.clock.defer(() => {
      this.deferred = false;
      this.dispatch();
    });
  }

  close(): void {
    this.closed = true;
    if (this.delayTimer !== undefined) this.host.clock.clearTimeout(this.delayTimer);
  }

  private dispatch(): void {
    if (this.running || this.awaitingGrant) return;
    if (this.delayTimer !== undefined) {
      this.host.clock.clearTimeout(this.delayTimer);
      this.delayTimer = undefined;
    }
    let ready = 0;
    let oldestNs: bigint | undefined;
    for (const slot of this.slots) {
      const first = slot.queue[0];
      if (!first || slot.inFlight) continue;
      ready++;
      if (oldestNs === undefined || first.request.arrivalNs < oldestNs) oldestNs = first.request.arrivalNs;
    }
    if (ready === 0) return;
    if (this.maxQueueDelayNs > 0n && this.minimumSlotUtilization > 0) {
      const waitedNs = this.host.clock.nowNs() - oldestNs!;
      if (waitedNs < this.maxQueueDelayNs && ready / this.slots.length < this.minimumSlotUtilization) {
        this.delayTimer = this.host.clock.setPreciseTimeout(() => {
          this.delayTimer = undefined;
          this.dispatch();
        }, this.maxQueueDelayNs - waitedNs);
        return;
      }
    }
    const gate = this.host.context.gate;
    if (gate && !gate.acquire(this.instanceIndex, () => this.onGrant())) {
      // The batch forms when the grant comes, from what is ready then.
      this.awaitingGrant = true;
      return;
    }
    this.start();
  }

  private onGrant(): void {
    this.awaitingGrant = false;
    if (!this.slots.some((s) => s.queue.length > 0 && !s.inFlight)) {
      this.host.context.gate!.release(this.instanceIndex);
      return;
    }
    this.start();
  }

  /** Takes the next request of each ready slot, up to the highest ready one, and runs them. */
  private start(): void {
    let last = -1;
    this.slots.forEach((slot, i) => {
      if (slot.queue.length > 0 && !slot.inFlight) last = i;
    });
    const entries: (Prepared | undefined)[] = [];
    let first: Prepared | undefined;
    for (let i = 0; i <= last; i++) {
      const slot = this.slots[i]!;
      const next = slot.queue[0];
      if (!next || slot.inFlight || (first && !sameShapes(first, next.request.inputs, this.host.states.any ? this.stateOf(next) : []))) {
        entries.push(undefined);
        continue;
      }
      slot.inFlight = true;
      const prepared = this.host.take(slot);
      first ??= prepared;
      entries.push(prepared);
    }
    this.running = true;
    void this.run(entries, first!);
  }

  /** The state a waiting request would run with, to compare shapes before it is taken. */
  private stateOf(next: Slot['queue'][number]): readonly Tensor[] {
    return next.start || !next.sequence.state ? this.host.states.initial() : next.sequence.state;
  }

  private async run(entries: readonly (Prepared | undefined)[], first: Prepared): Promise<void> {
    const { stats } = this.host.context;
    const taken = entries.filter((e): e is Prepared => e !== undefined);
    const dispatchedNs = this.host.clock.nowNs();
    try {
      let timings: ExecutionTimings;
      if (this.instance.executeRequests) {
        timings = await this.runRequests(taken);
      } else {
        const rows = entries.map(() => 1);
        const nullInputs = [...first.waiting.request.inputs.map(zerosLike), ...this.host.states.zerosLike(first.state)];
        const inputs = [
          ...assembleBatch(
            entries.map((e) => (e ? [...e.waiting.request.inputs, ...e.state] : nullInputs)),
            rows,
          ),
          ...controlTensors(
            this.host.controls,
            entries.map((e) => e?.signal ?? NOT_READY),
            this.host.batching,
          ),
        ];
        const result = await this.instance.execute(inputs, this.host.outputNames);
        timings = result.timings;
        const perSlot = splitOutputs(result.outputs, rows);
        stats.recordExecution(entries.length, timings);
        entries.forEach((e, i) => {
          if (!e) return;
          this.recordSuccess(e, dispatchedNs, timings);
          this.host.finish(e, perSlot[i]!);
        });
      }
    } catch (error) {
      const failure = toInferenceServerError(error);
      for (const e of taken) {
        stats.recordFailure(e.waiting.request, 'BACKEND');
        if (error instanceof GpuOutOfMemoryError) stats.recordGpuOutOfMemory();
        this.host.fail(e, failure);
      }
    } finally {
      this.running = false;
      this.host.context.gate?.release(this.instanceIndex);
      for (const slot of this.slots) if (slot.inFlight) this.host.slotDone(slot);
      this.wake();
    }
  }

  /** A JavaScript model: each ready request with its own inputs and its control tensors, answered on its own. */
  private async runRequests(taken: readonly Prepared[]): Promise<ExecutionTimings> {
    const { stats } = this.host.context;
    const dispatchedNs = this.host.clock.nowNs();
    const result = await this.instance.executeRequests!(
      taken.map(({ waiting, signal }) => ({
        ...(waiting.request.id !== undefined && { id: waiting.request.id }),
        inputs: [...waiting.request.inputs, ...controlTensors(this.host.controls, [signal], this.host.batching)],
        outputNames: waiting.request.outputNames ?? this.host.context.outputNames,
        parameters: this.host.parametersOf(waiting),
      })),
    );
    stats.recordExecution(taken.length, result.timings);
    taken.forEach((e, i) => {
      if ('outputs' in result.responses[i]!) this.recordSuccess(e, dispatchedNs, result.timings);
      else stats.recordFailure(e.waiting.request, 'BACKEND');
    });
    this.host.settle(taken, result.responses);
    return result.timings;
  }

  private recordSuccess(e: Prepared, dispatchedNs: bigint, timings: ExecutionTimings): void {
    const { request } = e.waiting;
    this.host.context.stats.recordSuccess(request, Number(dispatchedNs - request.arrivalNs), timings);
    if (request.trace) markCompute(request.trace, dispatchedNs, timings);
  }
}

/** Whether a request (and the state it would run with) has the shapes of the batch's first. */
function sameShapes(first: Prepared, inputs: readonly Tensor[], state: readonly Tensor[]): boolean {
  const same = (a: readonly Tensor[], b: readonly Tensor[]) => a.every((t, i) => t.shape.join() === b[i]?.shape.join());
  return same(first.waiting.request.inputs, inputs) && same(first.state, state);
}

/** A null request's input: zeros of the same shape (BYTES: empty strings). */
function zerosLike(tensor: Tensor): Tensor {
  const bytes = tensor.datatype === 'BYTES' ? 4 * elementCount(tensor.shape) : tensor.data.byteLength;
  return { ...tensor, data: new Uint8Array(bytes) };
}
