import type { ModelConfig } from '../config/model-config.ts';
import { Errors } from '../errors/errors.ts';

/** Per-model parameter: the latency objective in milliseconds (Batchwise extension, see docs/batching.md). */
export const LATENCY_OBJECTIVE_PARAMETER = 'batchwise_latency_objective_ms';

/**
 * The model's latency objective in nanoseconds, or undefined when it declares none. Checked at
 * load: a positive finite number of milliseconds, on a model with dynamic_batching (the
 * objective decides how batches form; a model that runs each request alone has nothing to decide).
 */
export function latencyObjectiveNs(config: ModelConfig): bigint | undefined {
  const text = config.parameters?.[LATENCY_OBJECTIVE_PARAMETER]?.string_value;
  if (text === undefined) return undefined;
  const ms = text.trim() === '' ? NaN : Number(text);
  const fail = (why: string) => Errors.invalidArg(`model '${config.name}': parameter ${LATENCY_OBJECTIVE_PARAMETER} ${why}, got '${text}'`);
  if (!Number.isFinite(ms) || ms <= 0) throw fail('must be a positive number of milliseconds');
  if (config.dynamic_batching === undefined || !(config.max_batch_size > 0)) {
    throw fail('requires dynamic_batching (and max_batch_size > 0): the objective decides how batches form');
  }
  return BigInt(Math.round(ms * 1e6));
}
