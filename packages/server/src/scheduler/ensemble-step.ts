import { describeStep, type EnsembleStep } from '../config/ensemble.ts';
import { Errors, InferenceServerError, toInferenceServerError } from '../errors/errors.ts';
import type { InferenceRequest, InferenceResponse } from '../protocol/types.ts';
import type { Parameters, Tensor } from '../tensor/tensor.ts';
import type { RequestTrace } from '../trace/tracer.ts';
import type { QueuedRequest } from './scheduler.ts';

/** A step's request to its model: its inputs named as the model names them, read from the ensemble's tensors. */
export function stepRequest(
  step: EnsembleStep,
  tensors: ReadonlyMap<string, Tensor>,
  parameters: Parameters,
  trace: RequestTrace | undefined,
): InferenceRequest {
  return {
    modelName: step.modelName,
    ...(step.modelVersion !== undefined && { modelVersion: step.modelVersion }),
    inputs: step.inputs.map(({ stepTensor, ensembleTensor }) => ({ ...tensors.get(ensembleTensor)!, name: stepTensor })),
    outputs: step.outputs.map(({ stepTensor }) => ({ name: stepTensor, parameters: {} })),
    parameters,
    ...(trace && { parentTraceId: trace.id }),
    ...(trace?.context && { traceContext: trace.context }),
  };
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

/** A step's failure as the ensemble's: the step's code, and a message naming the ensemble and the step. */
export function stepFailure(ensembleName: string, step: EnsembleStep, error: unknown): InferenceServerError {
  const failure = toInferenceServerError(error);
  return new InferenceServerError(failure.code, `${describeStep(ensembleName, step)} failed: ${failure.message}`, { cause: error });
}

/**
 * What every step's request carries, as Triton's ensemble scheduler passes it on: the request's
 * parameters (its priority and queue timeout among them; 0 or absent: the step model's default).
 */
export function stepParameters(request: QueuedRequest): Parameters {
  if (request.parameters) return request.parameters;
  return {
    ...(request.priority > 0 && { priority: request.priority }),
    ...(request.timeoutMicroseconds > 0 && { timeout: request.timeoutMicroseconds }),
  };
}
