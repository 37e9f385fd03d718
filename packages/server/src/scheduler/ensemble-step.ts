import { type EnsembleStep } from '../config/ensemble.ts';
import { Errors, InferenceServerError, toInferenceServerError } from '../errors/errors.ts';
import type { InferenceRequest, InferenceResponse } from '../protocol/types.ts';
import type { Parameters, Tensor } from '../tensor/tensor.ts';
import type { RequestTrace } from '../trace/tracer.ts';
import type { QueuedRequest } from './scheduler.ts';

/**
 * What every step request of one ensemble request carries, as Triton's ensemble scheduler passes it
 * on: the request's id, its correlation id and sequence flags (the `sequence_id`, `sequence_start` and
 * `sequence_end` parameters, the id as exactly as the frontend read it), its priority, queue timeout
 * and other parameters, and its trace.
 */
export interface StepOrigin {
  readonly parameters: Parameters;
  readonly id?: string;
  readonly sequenceId?: bigint | string;
  readonly trace?: RequestTrace;
}

/**
 * How a tensor crosses between a batching and a non-batching side of an ensemble (Triton's
 * ReshapeTensorDims), decided at load for each connection whose sides differ. `add`: the reader
 * batches and the tensor came from a side that does not: a shape that matches the reader's `dims` gets
 * a batch dimension of 1. Otherwise the reader does not batch: a tensor of batch 1 whose shape does not
 * match `dims` loses its batch dimension. Any other shape passes as it is (the reader's own validation
 * judges it).
 */
export interface BatchReshape {
  readonly add: boolean;
  readonly dims: readonly number[];
}

/** The reshapes of one ensemble, by step (one entry per step input, in order) and by ensemble output (in config order). */
export interface EnsembleReshapes {
  readonly stepInputs: ReadonlyMap<EnsembleStep, readonly (BatchReshape | undefined)[]>;
  readonly outputs: readonly (BatchReshape | undefined)[];
}

export function reshapeForBatching(tensor: Tensor, reshape: BatchReshape | undefined): Tensor {
  if (!reshape) return tensor;
  const matches = dimsMatch(reshape.dims, tensor.shape);
  if (reshape.add) return matches ? { ...tensor, shape: [1, ...tensor.shape] } : tensor;
  return !matches && tensor.shape[0] === 1 ? { ...tensor, shape: tensor.shape.slice(1) } : tensor;
}

/** Triton's CompareDimsWithWildcard: as many dimensions, each equal or -1 on either side. */
export function dimsMatch(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === -1 || b[i] === -1 || d === b[i]);
}

/** A step's request to its model: its inputs named as the model names them, read from the ensemble's tensors. */
export function stepRequest(
  step: EnsembleStep,
  tensors: ReadonlyMap<string, Tensor>,
  origin: StepOrigin,
  reshapes: EnsembleReshapes | undefined,
): InferenceRequest {
  const reshape = reshapes?.stepInputs.get(step);
  const { trace } = origin;
  return {
    modelName: step.modelName,
    ...(step.modelVersion !== undefined && { modelVersion: step.modelVersion }),
    inputs: step.inputs.map(({ stepTensor, ensembleTensor }, i) => ({
      ...reshapeForBatching(tensors.get(ensembleTensor)!, reshape?.[i]),
      name: stepTensor,
    })),
    outputs: step.outputs.map(({ stepTensor }) => ({ name: stepTensor, parameters: {} })),
    parameters: origin.parameters,
    ...(origin.id !== undefined && { id: origin.id }),
    ...(origin.sequenceId !== undefined && { sequenceId: origin.sequenceId }),
    ...(trace && { parentTraceId: trace.id }),
    ...(trace?.context && { traceContext: trace.context }),
  };
}

/** The ensemble's outputs in config order, each shaped for the ensemble's batching. */
export function ensembleOutputs(
  outputNames: readonly string[],
  tensors: ReadonlyMap<string, Tensor>,
  reshapes: EnsembleReshapes | undefined,
): Tensor[] {
  return outputNames.map((name, i) => reshapeForBatching(tensors.get(name)!, reshapes?.outputs[i]));
}

/** Puts a step's response into the ensemble's tensors, each under the ensemble tensor its output_map names; returns its bytes. */
export function storeStepOutputs(step: EnsembleStep, response: InferenceResponse, tensors: Map<string, Tensor>): number {
  let bytes = 0;
  for (const { stepTensor, ensembleTensor } of step.outputs) {
    const output = response.outputs.find((t) => t.name === stepTensor);
    if (!output) throw Errors.internal(`model '${step.modelName}' produced no output '${stepTensor}'`);
    tensors.set(ensembleTensor, { ...output, name: ensembleTensor });
    bytes += output.data.byteLength;
  }
  return bytes;
}

/** A step's failure as the ensemble's, in Triton's words: the step's code, its message after "in ensemble 'E', ". */
export function stepFailure(ensembleName: string, error: unknown): InferenceServerError {
  const failure = toInferenceServerError(error);
  return new InferenceServerError(failure.code, `in ensemble '${ensembleName}', ${failure.message}`, { cause: error });
}

/** What the steps of `request` carry (StepOrigin); without parameters, its priority and queue timeout (0: the step model's default). */
export function stepOrigin(request: QueuedRequest): StepOrigin {
  const parameters = request.parameters ?? {
    ...(request.priority > 0 && { priority: request.priority }),
    ...(request.timeoutMicroseconds > 0 && { timeout: request.timeoutMicroseconds }),
  };
  return {
    parameters,
    ...(request.id !== undefined && { id: request.id }),
    ...(request.sequenceId !== undefined && { sequenceId: request.sequenceId }),
    ...(request.trace && { trace: request.trace }),
  };
}
