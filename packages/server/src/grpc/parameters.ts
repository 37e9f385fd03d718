import { Errors } from '../core/index.ts';
import type { Parameters } from '../tensor/tensor.ts';
import type { InferParameterWire, ParameterMapWire, WireLong } from './wire-types.ts';

/**
 * InferParameter oneofs -> plain values. 64-bit integers become numbers; one beyond 2^53
 * is refused rather than silently rounded. `where` names the owner in error messages.
 */
export function fromInferParameters(map: ParameterMapWire | undefined, where: string): Parameters {
  const out: Parameters = {};
  if (!map) return out;
  for (const [key, p] of Object.entries(map)) {
    switch (p.parameter_choice) {
      case 'bool_param':
        out[key] = p.bool_param ?? false;
        break;
      case 'string_param':
        out[key] = p.string_param ?? '';
        break;
      case 'double_param':
        out[key] = p.double_param ?? 0;
        break;
      case 'int64_param':
        out[key] = safeInteger(p.int64_param ?? 0, key, where);
        break;
      case 'uint64_param':
        out[key] = safeInteger(p.uint64_param ?? 0, key, where);
        break;
      default:
        throw Errors.invalidArg(`parameter '${key}' of ${where} has no value`);
    }
  }
  return out;
}

function safeInteger(value: WireLong, key: string, where: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) {
    throw Errors.invalidArg(`parameter '${key}' of ${where} is ${value}, beyond the integers this server handles exactly (2^53)`);
  }
  return n;
}

/** Plain values -> InferParameter: integers travel as int64, other numbers as double. */
export function toInferParameters(parameters: Parameters | undefined): ParameterMapWire {
  const out: ParameterMapWire = {};
  if (!parameters) return out;
  for (const [key, value] of Object.entries(parameters)) out[key] = toInferParameter(value);
  return out;
}

function toInferParameter(value: string | number | boolean): InferParameterWire {
  if (typeof value === 'boolean') return { bool_param: value };
  if (typeof value === 'string') return { string_param: value };
  return Number.isSafeInteger(value) ? { int64_param: value } : { double_param: value };
}
