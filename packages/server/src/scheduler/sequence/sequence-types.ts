import type { RequestOutcome } from '../../backends/backend.ts';
import type { SequenceControls } from '../../config/sequence-batching.ts';
import type { MemoryReservation } from '../../memory/memory-guard.ts';
import type { Parameters, Tensor } from '../../tensor/tensor.ts';
import type { Clock } from '../clock.ts';
import type { QueuedRequest, SchedulerContext } from '../scheduler.ts';
import type { SlotSignal } from './control-tensors.ts';
import type { ImplicitStates } from './implicit-state.ts';

/** The sequence batcher's data, shared by the scheduler (sequence-scheduler.ts) and its per-instance batchers. */

/** One sequence the batcher knows: in a slot of one instance, or in the backlog waiting for one. */
export class Sequence {
  slot: Slot | undefined;
  backlog: Backlog | undefined;
  /** Its implicit state after its last request ran; undefined before its first (and a START starts over). */
  state: readonly Tensor[] | undefined;
  /** What its state holds, charged to the memory guard while it has a slot. */
  memory: MemoryReservation | undefined;
  memoryBytes = 0;
  /** When it last had a request arrive or finish, for max_sequence_idle_microseconds. */
  lastNs: bigint;
  idleTimer: unknown;
  /** Its slot was given up (END, idle, unload): a request of it still running no longer updates its state. */
  gone = false;
  /** Its END request arrived: that request frees the slot, the idle timeout does not. */
  ended = false;

  constructor(
    readonly key: string,
    readonly id: bigint | string,
    nowNs: bigint,
  ) {
    this.lastNs = nowNs;
  }
}

/** A request of a sequence, waiting in its slot's queue or in the backlog. */
export interface SequenceWaiting {
  readonly request: QueuedRequest;
  readonly sequence: Sequence;
  readonly start: boolean;
  readonly end: boolean;
  readonly resolve: (outputs: Tensor[]) => void;
  readonly reject: (error: Error) => void;
}

/** A batch slot of one instance (direct), or a candidate sequence of it (oldest). */
export interface Slot {
  readonly instance: number;
  readonly index: number;
  sequence: Sequence | undefined;
  /** Its sequence's requests in arrival order. */
  readonly queue: SequenceWaiting[];
  /** A request of it is running (direct: in the batch; oldest: its one request in the dynamic batcher). */
  inFlight: boolean;
}

/** A sequence waiting for a slot, with its requests; kept until a slot takes it, even after its END arrived. */
export interface Backlog {
  readonly sequence: Sequence;
  readonly queue: SequenceWaiting[];
  /** The earliest deadline its requests' `timeout` parameters set, as Triton's backlog expiry. */
  expiresAtNs: bigint | undefined;
  timer: unknown;
}

/** A request taken from its slot to run: its state input (empty without implicit state) and what the model is told. */
export interface Prepared {
  readonly waiting: SequenceWaiting;
  readonly state: readonly Tensor[];
  readonly signal: SlotSignal;
}

/** What the per-instance batchers of either strategy need from the scheduler. */
export interface SlotBatcher {
  /** The slot got a request, or a sequence: run what can run. */
  wake(slot: Slot): void;
  /** Requests it holds that are not running yet (oldest: in its dynamic batcher). */
  readonly queued?: number;
  close(): void;
}

/** What the per-instance batchers (direct-batcher.ts, oldest-batcher.ts) use of the sequence scheduler. */
export interface SlotHost {
  readonly context: SchedulerContext;
  readonly clock: Clock;
  readonly controls: SequenceControls;
  readonly states: ImplicitStates;
  /** What the instance is asked for: the config's outputs and the state outputs. */
  readonly outputNames: readonly string[];
  readonly batching: boolean;
  /** Takes the slot's next request to run. */
  take(slot: Slot): Prepared;
  /** The request ran: its state output is kept, its outputs answer it. */
  finish(prepared: Prepared, outputs: Tensor[]): void;
  fail(prepared: Prepared, error: Error): void;
  /** Answers each request of a batch by its outcome (an instance that runs requests on their own). */
  settle(prepared: readonly Prepared[], outcomes: readonly RequestOutcome[]): void;
  /** A slot's running request is done. */
  slotDone(slot: Slot): void;
  /** A JavaScript model's request parameters. */
  parametersOf(waiting: SequenceWaiting): Parameters;
  publishPending(): void;
}
