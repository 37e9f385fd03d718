import type { ExecutionResult, ExecutionTimings, InstanceRequest, RequestsResult, StreamEnd, StreamedResponse } from './backend.ts';
import type { LiveRequests } from './js/live-requests.ts';
import type { Tensor } from '../tensor/tensor.ts';

/** A batch sent to a model-code instance's runner (a worker thread, a Python process) and not yet answered. */
export interface PendingRun {
  readonly requests: readonly InstanceRequest[];
  /** The instance's key of each request (its live entry). */
  readonly keys: readonly number[];
  /** A decoupled model's requests: when each ends. */
  readonly ended: readonly (Promise<StreamEnd> | undefined)[];
  /** The execute timeout. */
  readonly timer: NodeJS.Timeout;
  resolve(result: RequestsResult): void;
  reject(error: Error): void;
}

const NO_TIMINGS: ExecutionTimings = { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 };

/**
 * The batches a JavaScript or Python instance has sent and not had answered, by execute id, and how
 * one ends: a decoupled model's requests answer through their ends (those still open end with a
 * failure), the others with the batch's outcome.
 */
export class PendingRuns<W> {
  private readonly runs = new Map<number, PendingRun>();

  constructor(
    private readonly live: LiveRequests<W>,
    private readonly decoupled: boolean,
  ) {}

  add(id: number, run: PendingRun): void {
    this.runs.set(id, run);
  }

  /** The run of `id`, no longer pending (its timeout cleared); undefined when it was answered or failed already. */
  take(id: number): PendingRun | undefined {
    const run = this.runs.get(id);
    if (!run) return undefined;
    this.runs.delete(id);
    clearTimeout(run.timer);
    return run;
  }

  /**
   * The trace a call made during execute() joins: the first traced request of that batch (a call
   * cannot tell which request of a batch it serves). Nothing when none is traced.
   */
  callerOf(executeId: number | undefined): InstanceRequest['caller'] {
    if (executeId === undefined) return undefined;
    return this.runs.get(executeId)?.requests.find((r) => r.caller !== undefined)?.caller;
  }

  /** The batch returned: a decoupled model's requests answer through their ends; the others' are done. */
  returned(run: PendingRun, timings: ExecutionTimings): boolean {
    if (this.decoupled) {
      run.resolve({ responses: run.ended.map((ended) => ({ ended: ended! })), timings });
      return true;
    }
    for (const key of run.keys) this.live.done(key);
    return false;
  }

  /** A batch that failed as a whole: its requests fail with `error` (a decoupled one that ended keeps its end). */
  fail(run: PendingRun, error: Error): void {
    clearTimeout(run.timer);
    if (!this.decoupled) {
      for (const key of run.keys) this.live.done(key);
      run.reject(error);
      return;
    }
    for (const key of run.keys) this.live.end(key, error);
    run.resolve({ responses: run.ended.map((ended) => ({ ended: ended! })), timings: NO_TIMINGS });
  }

  /** Every pending batch fails with `error` (the runner died, or closed). */
  failAll(error: Error): void {
    const runs = [...this.runs.values()];
    this.runs.clear();
    for (const run of runs) this.fail(run, error);
  }
}

/**
 * One assembled batch run as one request (warmup samples) by an instance that runs each request on
 * its own; a decoupled model's last response is its answer.
 */
export async function executeAsOneRequest(
  executeRequests: (requests: readonly InstanceRequest[]) => Promise<RequestsResult>,
  decoupled: boolean,
  inputs: readonly Tensor[],
  outputNames: readonly string[],
): Promise<ExecutionResult> {
  let last: StreamedResponse | undefined;
  const responses = decoupled ? { send: async (response: StreamedResponse | undefined) => void (last = response ?? last) } : undefined;
  const { responses: outcomes, timings } = await executeRequests([
    { inputs, outputNames, parameters: {}, ...(responses && { responses }) },
  ]);
  let outcome = outcomes[0]!;
  if ('ended' in outcome) {
    const end = await outcome.ended;
    outcome = end.error ? { error: end.error } : (last ?? { outputs: [] });
  }
  if ('error' in outcome) throw outcome.error;
  return { outputs: outcome.outputs, timings };
}
