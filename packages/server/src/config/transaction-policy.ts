import type { ModelConfig } from './model-config.ts';

/**
 * Whether a config's `model_transaction_policy { decoupled: true }`: the model answers a request with
 * zero, one or many responses, then a final flag (Triton's decoupled models), so it is served only as a
 * stream (gRPC ModelStreamInfer, HTTP generate and generate_stream).
 */
export function isDecoupled(config: ModelConfig): boolean {
  const policy = config['model_transaction_policy'] as { decoupled?: unknown } | undefined;
  return policy?.decoupled === true;
}
