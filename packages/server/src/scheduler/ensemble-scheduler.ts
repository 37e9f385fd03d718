import type { EnsemblePlan, EnsembleStep } from '../config/ensemble.ts';
import { Errors } from '../errors/errors.ts';
import type { VersionStatistics } from '../metrics/version-statistics.ts';
import type { InferenceCall, InferenceResponse } from '../protocol/types.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { streamEnsemble, type StreamingEnsemble } from './ensemble-stream.ts';
import {
  ensembleOutputs,
  stepFailure,
  stepOrigin,
  stepRequest,
  storeStepOutputs,
  type EnsembleReshapes,
  type StepOrigin,
} from './ensemble-step.ts';
import { stepSlotsOf, type StepSlots } from './step-slots.ts';
import type { QueuedRequest, Scheduler } from './scheduler.ts';

export interface EnsembleContext {
  readonly ensembleName: string;
  readonly plan: EnsemblePlan;
  /** The ensemble's outputs in config order: enqueue resolves with one tensor each. */
  readonly outputNames: readonly string[];
  readonly stats: VersionStatistics;
  /** The server's request path: each step goes through its model's own validation and scheduler. */
  readonly callModel: InferenceCall;
  /** Where batching and non-batching sides meet (decided at load); undefined when nowhere. */
  readonly reshapes?: EnsembleReshapes;
  /** Present when a step is decoupled (the ensemble is then decoupled): how its responses flow (ensemble-stream.ts). */
  readonly streaming?: Omit<StreamingEnsemble, 'ensembleName' | 'outputNames' | 'callModel' | 'stepSlots'>;
}

/**
 * Runs an ensemble as Triton's ensemble scheduler does: a step starts as soon as every tensor
 * it reads exists, so independent branches run at the same time. Each step is an inference of
 * its model through the server's own path (its scheduler batches the steps of concurrent
 * ensemble requests together), with the request's priority and queue timeout. Tensors pass
 * from step to step as they are, with no encoding; the step model's scheduler copies them into
 * its batch, as it copies any request's inputs. The first step that fails fails the request
 * with that step's error code and a message naming the step; no further step starts. An ensemble
 * with a decoupled step streams instead (ensemble-stream.ts), decided at load.
 */
export class EnsembleScheduler implements Scheduler {
  private running = 0;
  private idleWaiters: (() => void)[] = [];
  private readonly runRequest: (request: QueuedRequest) => Promise<Tensor[]>;
  /** max_inflight_requests per step, when the config sets it (else nothing is counted). */
  private readonly stepSlots: ReadonlyMap<EnsembleStep, StepSlots> | undefined;

  constructor(private readonly context: EnsembleContext) {
    const { streaming, ensembleName, outputNames, callModel, plan, reshapes } = context;
    this.stepSlots = stepSlotsOf(plan.steps, plan.maxInflightRequests);
    if (streaming) {
      const ensemble: StreamingEnsemble = {
        ...streaming,
        ensembleName,
        outputNames,
        callModel,
        ...(this.stepSlots && { stepSlots: this.stepSlots }),
        ...(reshapes && { reshapes }),
      };
      this.runRequest = (request) => streamEnsemble(ensemble, request).then(() => []);
    } else {
      this.runRequest = (request) => this.run(request);
    }
  }

  get pendingCount(): number {
    return this.running;
  }

  async enqueue(request: QueuedRequest): Promise<Tensor[]> {
    const { stats } = this.context;
    this.running++;
    const startNs = process.hrtime.bigint();
    request.trace?.mark('COMPUTE_START', startNs);
    try {
      const outputs = await this.runRequest(request);
      const endNs = process.hrtime.bigint();
      request.trace?.mark('COMPUTE_END', endNs);
      const timings = { computeInputNs: 0, computeInferNs: Number(endNs - startNs), computeOutputNs: 0 };
      stats.recordExecution(request.batchSize, timings);
      stats.recordSuccess(request, Number(startNs - request.arrivalNs), timings);
      return outputs;
    } catch (error) {
      stats.recordFailure(request, request.signal?.aborted ? 'CANCELED' : 'BACKEND');
      throw error;
    } finally {
      this.running--;
      if (this.running === 0) {
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        for (const resolve of waiters) resolve();
      }
    }
  }

  drain(): Promise<void> {
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** The dataflow of one request: launches every step whose inputs exist, again each time one finishes. */
  private run(request: QueuedRequest): Promise<Tensor[]> {
    const { plan, outputNames, ensembleName, reshapes } = this.context;
    const tensors = new Map<string, Tensor>(request.inputs.map((t) => [t.name, t]));
    const waiting = new Set(plan.steps);
    const origin = stepOrigin(request);
    return new Promise<Tensor[]>((resolve, reject) => {
      let inFlight = 0;
      let failed = false;
      const launchReady = (): void => {
        for (const step of waiting) {
          if (!step.inputs.every((i) => tensors.has(i.ensembleTensor))) continue;
          waiting.delete(step);
          inFlight++;
          this.runStep(step, tensors, origin, request.signal).then(
            (response) => {
              inFlight--;
              if (failed) return;
              try {
                storeStepOutputs(step, response, tensors);
              } catch (error) {
                failed = true;
                reject(stepFailure(ensembleName, error));
                return;
              }
              launchReady();
            },
            (error: unknown) => {
              inFlight--;
              if (failed) return;
              failed = true;
              reject(error);
            },
          );
        }
        if (failed || inFlight > 0) return;
        const missing = outputNames.filter((name) => !tensors.has(name));
        if (missing.length > 0 || waiting.size > 0) {
          reject(
            Errors.internal(`ensemble '${ensembleName}' finished its steps without producing ${missing.join(', ') || 'every step input'}`),
          );
        } else {
          resolve(ensembleOutputs(outputNames, tensors, reshapes));
        }
      };
      launchReady();
    });
  }

  /** One step: its model's inputs named as the model names them; its response, or its failure as the ensemble's. */
  private async runStep(
    step: EnsembleStep,
    tensors: ReadonlyMap<string, Tensor>,
    origin: StepOrigin,
    signal: AbortSignal | undefined,
  ): Promise<InferenceResponse> {
    const { callModel, ensembleName, reshapes } = this.context;
    const slots = this.stepSlots?.get(step);
    if (slots) await slots.acquire(signal);
    try {
      // The ensemble request's cancellation cancels its steps (a queued step leaves its model's queue).
      return await callModel(stepRequest(step, tensors, origin, reshapes), signal && { signal });
    } catch (error) {
      throw stepFailure(ensembleName, error);
    } finally {
      slots?.release();
    }
  }
}
