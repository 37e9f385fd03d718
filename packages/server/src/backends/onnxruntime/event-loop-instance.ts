import { stat } from 'node:fs/promises';
import ort from 'onnxruntime-node';
import type { ModelConfig } from '../../config/model-config.ts';
import { modelFacingDims } from '../../config/shape-rules.ts';
import { CONFIG_TYPE_TO_DATATYPE, TYPED_ARRAY_OF, type DataType } from '../../tensor/datatype.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { ExecutionResult, InstanceOptions, ModelInstance } from '../backend.ts';
import { createSyncSession, type SyncSession } from './native-session.ts';
import { ownBuffer, type WireTensor } from './protocol.ts';
import { ortSessionOptions } from './session-options.ts';
import { runSession, runSessionNow } from './session-run.ts';

/**
 * Per-model parameter: the longest, in microseconds, a run of a full batch may take for the
 * instance to run on the event loop instead of a worker thread; 0 keeps it in a worker.
 */
export const EVENT_LOOP_RUN_PARAMETER = 'batchwise_event_loop_run_us';
export const DEFAULT_EVENT_LOOP_RUN_US = 500;

/** Larger model files are not tried: loading them would hold the event loop. */
const MAX_MODEL_BYTES = 4 * 1024 * 1024;
const WARM_RUNS = 2;
const TIMED_RUNS = 5;
/** A run past this many times the limit ends the timing: the first (cold) one, and those after it. */
const COLD_RUN_MARGIN = 50;
const WARM_RUN_MARGIN = 4;

/**
 * An ONNX Runtime session on the main thread (issue 34). A run blocks the event loop, so only a model
 * whose every run is known to be short gets one: on the CPU, a small file, every input and output
 * of fixed size (a run's work then depends on the batch size alone), no strings, one instance, and a
 * run of its largest batch, timed at load in the worker that loaded it (the median of several), under
 * `batchwise_event_loop_run_us` (500 by default; ONNX Runtime's own overhead of a run is some tens of
 * microseconds). For such a model the hand-off to a worker and back (two thread wake-ups, about
 * 100 us of CPU on these machines) costs more than the run itself. It gives up nothing a worker gave:
 * a native crash in ONNX Runtime ends the process either way (docs/operations.md, Faults).
 */
class EventLoopInstance implements ModelInstance {
  onFatal: ((error: Error) => void) | undefined;
  readonly executeNow: ModelInstance['executeNow'];
  private closed = false;
  /** The run in progress (the scheduler gives an instance one batch at a time): close waits for it. */
  private running: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly session: { readonly sync: SyncSession } | { readonly async: ort.InferenceSession },
    private readonly modelName: string,
  ) {
    if ('sync' in session) {
      const sync = session.sync;
      this.executeNow = (inputs, outputNames) => {
        this.refuseClosed();
        const { outputs, timings } = runSessionNow(sync, wireInputs(inputs), outputNames);
        return { outputs: tensorsOf(outputs), timings };
      };
    }
  }

  execute(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult> {
    if (this.executeNow) {
      try {
        return Promise.resolve(this.executeNow(inputs, outputNames));
      } catch (error) {
        return Promise.reject(error);
      }
    }
    const run = this.run(inputs, outputNames);
    this.running = run.catch(() => undefined);
    return run;
  }

  /** As a worker's instance answers once its version was unloaded. */
  private refuseClosed(): void {
    if (this.closed) throw new Error(`model instance of '${this.modelName}' is closed (its version was unloaded)`);
  }

  private async run(inputs: readonly Tensor[], outputNames: readonly string[]): Promise<ExecutionResult> {
    this.refuseClosed();
    const { outputs, timings } = await runSession((this.session as { async: ort.InferenceSession }).async, wireInputs(inputs), outputNames);
    return { outputs: tensorsOf(outputs), timings };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.running;
    if ('sync' in this.session) this.session.sync.release();
    else await this.session.async.release();
  }
}

function wireInputs(inputs: readonly Tensor[]): WireTensor[] {
  return inputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, buffer: ownBuffer(t.data) }));
}

function tensorsOf(outputs: readonly WireTensor[]): Tensor[] {
  return outputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, data: new Uint8Array(t.buffer) }));
}

/** A full batch of zeros for each input, when the model may run on the event loop; undefined when it may not. */
export async function eventLoopCandidate(options: InstanceOptions): Promise<{ batch: Tensor[]; limitUs: number } | undefined> {
  const config = options.model?.config;
  if (!config || options.device !== 'cpu') return undefined;
  const limitUs = eventLoopRunLimitUs(config);
  const shapes = fixedShapes(config);
  if (limitUs === 0 || !shapes || (config.instance_group ?? []).some((g) => (g.count ?? 1) > 1)) return undefined;
  if ((await stat(options.modelPath)).size > MAX_MODEL_BYTES) return undefined;
  return { batch: shapes.map(zeros), limitUs };
}

/**
 * How long `instance` (a worker's, so that timing blocks nothing) takes to run `batch`: the median of
 * TIMED_RUNS warm runs, in microseconds of the run alone; Infinity as soon as a run shows it is far
 * over `limitUs` (a slow model is not run again and again at load), or when it cannot run the batch.
 */
export async function timeFullBatch(
  instance: ModelInstance,
  batch: readonly Tensor[],
  outputNames: readonly string[],
  limitUs: number,
): Promise<number> {
  const runsUs: number[] = [];
  try {
    for (let i = 0; i < WARM_RUNS + TIMED_RUNS; i++) {
      // Each run transfers its inputs to the worker: a fresh copy of the zeros each time.
      const { timings } = await instance.execute(
        batch.map((t) => ({ ...t, data: new Uint8Array(t.data.byteLength) })),
        outputNames,
      );
      const us = (timings.computeInputNs + timings.computeInferNs + timings.computeOutputNs) / 1000;
      if (us > limitUs * (i === 0 ? COLD_RUN_MARGIN : WARM_RUN_MARGIN)) return Infinity;
      if (i >= WARM_RUNS) runsUs.push(us);
    }
  } catch {
    return Infinity; // a full batch of zeros it cannot run: the worker serves it, and its errors say why
  }
  return runsUs.sort((a, b) => a - b)[runsUs.length >> 1]!;
}

/** The instance on the event loop: a session of its own on the main thread. */
export async function createEventLoopInstance(options: InstanceOptions): Promise<ModelInstance> {
  const sessionOptions = ortSessionOptions(options.sessionOptions, 'cpu', 0);
  const sync = createSyncSession(options.modelPath, sessionOptions);
  const session = sync ? { sync } : { async: await ort.InferenceSession.create(options.modelPath, sessionOptions) };
  return new EventLoopInstance(session, options.modelName);
}

function eventLoopRunLimitUs(config: ModelConfig): number {
  const text = config.parameters?.[EVENT_LOOP_RUN_PARAMETER]?.string_value;
  if (text === undefined) return DEFAULT_EVENT_LOOP_RUN_US;
  const us = Number(text);
  if (!Number.isFinite(us) || us < 0) {
    throw new Error(`model '${config.name}': parameter ${EVENT_LOOP_RUN_PARAMETER} must be a number of microseconds >= 0, got '${text}'`);
  }
  return us;
}

/** Each input of a full batch as the model receives it, when the config declares every tensor of fixed size and none of strings. */
function fixedShapes(config: ModelConfig): { name: string; datatype: DataType; shape: number[] }[] | undefined {
  if (config.max_batch_size === undefined || config.input.length === 0 || config.output.length === 0) return undefined;
  const fixed = (tensor: { data_type: string; dims: number[]; reshape?: { shape?: number[] } }) => {
    const datatype = CONFIG_TYPE_TO_DATATYPE[tensor.data_type];
    const dims = modelFacingDims(tensor);
    return datatype === undefined || datatype === 'BYTES' || dims.some((d) => d < 0) ? undefined : { datatype, dims };
  };
  if (!config.output.every(fixed)) return undefined;
  const batch = config.max_batch_size > 0 ? [config.max_batch_size] : [];
  const shapes: { name: string; datatype: DataType; shape: number[] }[] = [];
  for (const input of config.input) {
    const found = fixed(input);
    if (!found) return undefined;
    shapes.push({ name: input.name, datatype: found.datatype, shape: [...batch, ...found.dims] });
  }
  return shapes;
}

function zeros({ name, datatype, shape }: { name: string; datatype: DataType; shape: number[] }): Tensor {
  let count = 1;
  for (const d of shape) count *= d;
  const bytes = datatype === 'BYTES' ? 0 : count * TYPED_ARRAY_OF[datatype].BYTES_PER_ELEMENT;
  return { name, datatype, shape, data: new Uint8Array(bytes) };
}
