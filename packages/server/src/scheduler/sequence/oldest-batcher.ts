import type { VersionStatistics } from '../../metrics/version-statistics.ts';
import { BatchingScheduler } from '../batching-scheduler.ts';
import { batchingOptionsFromConfig } from '../batching-options.ts';
import type { ExecutionGate } from '../rate-limiter.ts';
import { controlTensors } from './control-tensors.ts';
import type { Slot, SlotBatcher, SlotHost } from './sequence-types.ts';

/**
 * The `oldest` strategy on one instance (Triton's OldestSequenceBatch): the instance holds up to
 * `max_candidate_sequences` sequences, and a dynamic batcher of its own (batching-scheduler.ts, with
 * oldest's `preferred_batch_size`, `max_queue_delay_microseconds` and `preserve_ordering`) batches
 * their requests. Each candidate sequence has at most one request in that batcher at a time, its
 * next one only once the last has run, so a batch never holds two requests of one sequence and each
 * runs with the state its predecessor left. Every request it runs is ready: READY is always true.
 */
export class OldestBatcher implements SlotBatcher {
  private readonly batcher: BatchingScheduler;
  private closed = false;

  constructor(
    private readonly host: SlotHost,
    instanceIndex: number,
  ) {
    const { context } = host;
    const oldest = context.config.sequence_batching?.oldest ?? {};
    const config = {
      ...context.config,
      dynamic_batching: {
        ...(oldest.preferred_batch_size && { preferred_batch_size: oldest.preferred_batch_size }),
        max_queue_delay_microseconds: oldest.max_queue_delay_microseconds ?? 0,
        preserve_ordering: oldest.preserve_ordering ?? false,
      },
    };
    // The latency objective sheds requests, which would break a sequence: it is not applied here.
    const options = { ...batchingOptionsFromConfig(config), latencyObjectiveNs: undefined };
    this.batcher = new BatchingScheduler(
      {
        config,
        instances: [context.instances[instanceIndex]!],
        outputNames: host.outputNames,
        stats: pendingFromHost(context.stats, host),
        ...(context.maxBatchStringHeapBytes !== undefined && { maxBatchStringHeapBytes: context.maxBatchStringHeapBytes }),
        ...(context.gate && { gate: onInstance(context.gate, instanceIndex) }),
      },
      options,
      host.clock,
    );
  }

  /** Requests in this instance's dynamic batcher, not yet running. */
  get queued(): number {
    return this.batcher.queuedCount;
  }

  wake(slot: Slot): void {
    if (this.closed || slot.inFlight || slot.queue.length === 0) return;
    slot.inFlight = true;
    const prepared = this.host.take(slot);
    const { waiting, signal, state } = prepared;
    const { request } = waiting;
    const instance = this.host.context.instances[slot.instance]!;
    this.batcher
      .enqueue({
        inputs: [...request.inputs, ...controlTensors(this.host.controls, [signal], this.host.batching), ...state],
        batchSize: 1,
        priority: 0,
        timeoutMicroseconds: 0,
        arrivalNs: request.arrivalNs,
        ...(request.trace && { trace: request.trace }),
        ...(request.id !== undefined && { id: request.id }),
        ...(request.stringHeapBytes !== undefined && { stringHeapBytes: request.stringHeapBytes }),
        // A JavaScript model answers with what each request asked for; an ONNX model with every output and state.
        ...(instance.executeRequests && { outputNames: request.outputNames ?? this.host.context.outputNames }),
        parameters: this.host.parametersOf(waiting),
      })
      .then(
        (outputs) => this.host.finish(prepared, outputs),
        (error: Error) => this.host.fail(prepared, error),
      )
      .finally(() => {
        this.host.slotDone(slot);
        this.wake(slot);
      });
  }

  close(): void {
    this.closed = true;
  }
}

/** The version's statistics, but the pending gauge counts the whole sequence batcher, not this instance's queue. */
function pendingFromHost(stats: VersionStatistics, host: SlotHost): VersionStatistics {
  return Object.create(stats, { setPending: { value: () => host.publishPending() } }) as VersionStatistics;
}

/** The rate limiter's gate as the instance's own dynamic batcher sees it: its one instance is the version's `instanceIndex`. */
function onInstance(gate: ExecutionGate, instanceIndex: number): ExecutionGate {
  return {
    acquire: (_, onGrant) => gate.acquire(instanceIndex, onGrant),
    cancel: () => gate.cancel(instanceIndex),
    release: (_, again) => gate.release(instanceIndex, again),
    // The sequence batcher closes the version's gate once.
    close: () => {},
  };
}
