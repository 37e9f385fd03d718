import type { ResponseSink } from '../backends/backend.ts';
import type { EnsembleLineage } from '../config/ensemble-lineage.ts';
import type { EnsembleStep } from '../config/ensemble.ts';
import { Errors, toInferenceServerError, type InferenceServerError } from '../errors/errors.ts';
import type { MemoryReservation } from '../memory/memory-guard.ts';
import { listenedAbortController, offAbort, onAbort } from '../protocol/abort-listeners.ts';
import type { InferenceCall, InferenceResponse, InferenceStreamCall } from '../protocol/types.ts';
import type { Tensor } from '../tensor/tensor.ts';
import {
  ensembleOutputs,
  stepFailure,
  stepOrigin,
  stepRequest,
  storeStepOutputs,
  type EnsembleReshapes,
  type StepOrigin,
} from './ensemble-step.ts';
import type { QueuedRequest } from './scheduler.ts';
import type { StepSlots } from './step-slots.ts';

/** An ensemble with a decoupled step, as loaded (ensemble-loader.ts decides it). */
export interface StreamingEnsemble {
  readonly ensembleName: string;
  readonly lineage: EnsembleLineage;
  /** The ensemble's outputs in config order: each response carries one tensor each. */
  readonly outputNames: readonly string[];
  /** The server's request path: a step that answers once. */
  readonly callModel: InferenceCall;
  /** The server's request path as a stream: a decoupled step. */
  readonly streamModel: InferenceStreamCall;
  /** Charges the responses flowing between steps to the memory guard (throws when over budget). @default not charged */
  readonly reserveMemory?: (bytes: number) => MemoryReservation;
  /** max_inflight_requests per step, when the config sets it. */
  readonly stepSlots?: ReadonlyMap<EnsembleStep, StepSlots>;
  /** Where batching and non-batching sides meet, when anywhere. */
  readonly reshapes?: EnsembleReshapes;
}

/**
 * How many responses of one decoupled step of one request flow through the steps after it at once.
 * The step's next response is taken only when one of them is done (sent by the ensemble, or spent):
 * a client that does not read holds the decoupled step back, and what waits between steps is bounded.
 * A response that feeds another decoupled step flows alone: the inner step's responses wait for their
 * turn to be sent, and an inner model that served a later response's request first would wait forever.
 */
export const RESPONSES_BETWEEN_STEPS = 4;

/**
 * Runs one request of a decoupled ensemble, as Triton's ensemble scheduler does: each response of a
 * decoupled step is a tensor set of its own that flows on through the steps that read it (each step an
 * inference through the server's path, batched with other requests), and each set that completes the
 * ensemble's outputs is one response of the ensemble, the last one carrying the final flag when nothing
 * else is in flight (else the flag follows alone). Responses keep the order of the decoupled steps'
 * responses (depth-first through nested ones). The first failure (a step's error, an error response, a
 * cancellation) cancels every step still running or queued and, once they ended, ends the request with it.
 * Resolves once the final flag went.
 */
export function streamEnsemble(ensemble: StreamingEnsemble, request: QueuedRequest): Promise<void> {
  return new EnsembleStream(ensemble, request).run();
}

/** The tensors of one response of a decoupled step (or of the request itself), and what it flows on to. */
interface TensorSet {
  readonly lineage: number;
  readonly tensors: Map<string, Tensor>;
  /** Resolves once this set may send its response: every set before it in the request's order is done. */
  readonly turn: Promise<void>;
  /** What its tensors hold, charged while it flows; none for the request's own inputs (core charges those). */
  readonly charge: MemoryReservation | undefined;
  /**
   * Whether every decoupled step on its way sent it with its final flag: then its response may carry the
   * ensemble's final flag (when nothing else is in flight); otherwise the flag follows alone, as it did there.
   */
  readonly last: boolean;
}

class EnsembleStream {
  private failure: InferenceServerError | undefined;
  /** Cancels every step of the request: its client went away, or a step failed. Its queued steps listen at a Set entry's cost. */
  private readonly cancel = listenedAbortController();
  /** Step requests in flight and decoupled steps before their final flag (Triton's inflight_step_counter_). */
  private running = 0;
  /** Sets whose outputs are complete and whose response is not sent yet. */
  private unsent = 0;
  private finalSent = false;
  private readonly origin: StepOrigin;
  private readonly sink: ResponseSink;

  constructor(
    private readonly ensemble: StreamingEnsemble,
    private readonly request: QueuedRequest,
  ) {
    if (!request.responses)
      throw Errors.internal(`ensemble '${ensemble.ensembleName}' is decoupled but its request has no response stream`);
    this.sink = request.responses;
    this.origin = stepOrigin(request);
  }

  async run(): Promise<void> {
    const { signal } = this.request;
    const cancelled = { handleEvent: (): void => this.fail(Errors.cancelled()) };
    if (signal?.aborted) cancelled.handleEvent();
    else if (signal) onAbort(signal, cancelled);
    try {
      const tensors = new Map<string, Tensor>();
      for (const input of this.request.inputs) tensors.set(input.name, input);
      await this.flow({ lineage: 0, tensors, turn: Promise.resolve(), charge: undefined, last: true });
    } finally {
      if (signal) offAbort(signal, cancelled);
    }
    if (this.finalSent) return;
    if (this.failure) throw this.failure;
    await this.sink.send(undefined, true);
  }

  private fail(error: unknown): void {
    if (this.failure) return;
    this.failure = toInferenceServerError(error);
    this.cancel.abort(this.failure);
  }

  /** A failure of one set's steps: once every set before it is done, so that their responses go first. */
  private async failInTurn(set: TensorSet, error: unknown): Promise<void> {
    await set.turn;
    this.fail(error);
  }

  /** Runs every step of the set's lineage once its inputs are in the set, and sends the set's response; resolves once all of it is done. */
  private flow(set: TensorSet): Promise<void> {
    const { lineage, outputNames } = this.ensemble;
    const waiting = new Set(lineage.stepsIn[set.lineage]);
    let responds = set.lineage === lineage.outputsIn;
    return new Promise<void>((resolve) => {
      let pending = 0;
      const track = (work: Promise<void>, counted: boolean): void => {
        pending++;
        void work.then(() => {
          // Successors launch before the step stops counting as running: the last response sees nothing running only at the very end.
          advance();
          if (counted) this.running--;
          if (--pending === 0) resolve();
        });
      };
      const advance = (): void => {
        if (this.failure) return;
        if (responds && outputNames.every((name) => set.tensors.has(name))) {
          responds = false;
          this.unsent++;
          track(this.respond(set), false);
        }
        for (const step of waiting) {
          if (!step.inputs.every((i) => set.tensors.has(i.ensembleTensor))) continue;
          waiting.delete(step);
          if (lineage.startedBy.has(step)) {
            track(this.streamStep(step, set), false);
          } else {
            this.running++;
            track(this.callStep(step, set), true);
          }
        }
      };
      advance();
      if (pending === 0) resolve();
    });
  }

  /** A step that answers once: its outputs join the set. */
  private async callStep(step: EnsembleStep, set: TensorSet): Promise<void> {
    const slots = this.ensemble.stepSlots?.get(step);
    try {
      let response: InferenceResponse;
      if (slots) await slots.acquire(this.cancel.signal);
      try {
        response = await this.ensemble.callModel(this.stepRequest(step, set), { signal: this.cancel.signal });
      } finally {
        slots?.release();
      }
      if (this.failure) return;
      const bytes = storeStepOutputs(step, response, set.tensors);
      set.charge?.grow(bytes);
    } catch (error) {
      await this.failInTurn(set, stepFailure(this.ensemble.ensembleName, error));
    }
  }

  /**
   * A decoupled step: each of its responses becomes a set of the lineage it starts, RESPONSES_BETWEEN_STEPS
   * (or one) at most at once, each sending after the one before it. After a failure its stream is read to its end
   * (the step, cancelled, ends soon) so that the request ends only once its steps did.
   */
  private async streamStep(step: EnsembleStep, set: TensorSet): Promise<void> {
    const lineage = this.ensemble.lineage.startedBy.get(step)!;
    const window = this.ensemble.lineage.nests[lineage] ? 1 : RESPONSES_BETWEEN_STEPS;
    const flowing = new Set<Promise<void>>();
    let turn = set.turn;
    let open = true;
    // Its slot (max_inflight_requests) is held until its final response, as Triton holds it.
    const slots = this.ensemble.stepSlots?.get(step);
    let holdsSlot = false;
    const close = (): void => {
      if (open) this.running--;
      open = false;
      if (holdsSlot) slots!.release();
      holdsSlot = false;
    };
    this.running++;
    try {
      if (slots) {
        await slots.acquire(this.cancel.signal);
        holdsSlot = true;
      }
      for await (const event of this.ensemble.streamModel(this.stepRequest(step, set), { signal: this.cancel.signal })) {
        // An error response ends the request after the responses before it.
        if (event.kind === 'error') await this.failInTurn({ ...set, turn }, stepFailure(this.ensemble.ensembleName, event.error));
        if (event.kind === 'response') {
          while (flowing.size >= window && !this.failure) await Promise.race(flowing);
          if (!this.failure) {
            const next = this.responseSet(step, lineage, event.response, turn, set.last && event.final);
            if (next) {
              const done: Promise<void> = this.flow(next).then(() => {
                next.charge?.release();
                flowing.delete(done);
              });
              flowing.add(done);
              turn = done;
            }
          }
        }
        if (event.kind === 'final' || event.final) close();
      }
    } catch (error) {
      // Iterating throws when the step's request was refused before its model's queue.
      this.fail(stepFailure(this.ensemble.ensembleName, error));
    } finally {
      close();
      await Promise.all(flowing);
    }
  }

  /** A decoupled step's response as a tensor set of its own, charged to the memory guard; undefined (the request failed) when it cannot be. */
  private responseSet(
    step: EnsembleStep,
    lineage: number,
    response: InferenceResponse,
    turn: Promise<void>,
    last: boolean,
  ): TensorSet | undefined {
    try {
      const tensors = new Map<string, Tensor>();
      const bytes = storeStepOutputs(step, response, tensors);
      return { lineage, tensors, turn, charge: this.ensemble.reserveMemory?.(bytes), last };
    } catch (error) {
      this.fail(stepFailure(this.ensemble.ensembleName, error));
      return undefined;
    }
  }

  /** Sends the set's outputs as a response of the ensemble once it is the set's turn; final when nothing else is in flight. */
  private async respond(set: TensorSet): Promise<void> {
    await set.turn;
    this.unsent--;
    if (this.failure) return;
    const final = set.last && this.running === 0 && this.unsent === 0;
    try {
      await this.sink.send({ outputs: ensembleOutputs(this.ensemble.outputNames, set.tensors, this.ensemble.reshapes) }, final);
      if (final) this.finalSent = true;
    } catch (error) {
      this.fail(error);
    }
  }

  private stepRequest(step: EnsembleStep, set: TensorSet) {
    return stepRequest(step, set.tensors, this.origin, this.ensemble.reshapes);
  }
}
