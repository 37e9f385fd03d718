import type { Parameters, Tensor } from '../tensor/tensor.ts';

/**
 * A response's tensors with the parameters its model set on it (Triton's
 * `InferenceResponse(parameters=...)` of a Python model): they ride on the array the backend answers
 * with, through the scheduler unchanged, to the response the frontends encode. A response without
 * parameters costs nothing.
 */
type WithParameters = Tensor[] & { responseParameters?: Parameters };

export function withResponseParameters(outputs: Tensor[], parameters: Parameters | undefined): Tensor[] {
  if (parameters !== undefined && Object.keys(parameters).length > 0) (outputs as WithParameters).responseParameters = parameters;
  return outputs;
}

export function responseParametersOf(outputs: readonly Tensor[]): Parameters | undefined {
  return (outputs as WithParameters).responseParameters;
}
