import { Errors } from '../core/index.ts';
import type { Parameters } from '../tensor/tensor.ts';
import type { ParameterMapWire, WireLong } from './wire-types.ts';

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
        // A sequence_id is a uint64 sent as int64 (sequenceIdOf reads it exactly): kept here as it comes, for model code.
        out[key] =
          key === 'sequence_id' && where === 'the request' ? Number(p.int64_param ?? 0) : safeInteger(p.int64_param ?? 0, key, where);
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

/**
 * Triton's sequence parameters over gRPC (server infer_handler.cc): `sequence_id` an int64_param (read
 * as the uint64 it carries, so -1 is 2^64-1) or a string_param, `sequence_start` and `sequence_end`
 * bool_params; another kind is refused in Triton's words. Returns the exact id for the request.
 */
export function sequenceIdOf(map: ParameterMapWire | undefined): { sequenceId?: bigint | string } {
  if (!map) return {};
  for (const key of ['sequence_start', 'sequence_end']) {
    const p = map[key];
    if (p && p.parameter_choice !== 'bool_param') {
      throw Errors.invalidArg(`invalid value type for '${key}' parameter, expected bool_param.`);
    }
  }
  const id = map['sequence_id'];
  if (!id) return {};
  if (id.parameter_choice === 'int64_param') return { sequenceId: BigInt.asUintN(64, BigInt(id.int64_param ?? 0)) };
  if (id.parameter_choice === 'string_param') return { sequenceId: id.string_param ?? '' };
  throw Errors.invalidArg("invalid value type for 'sequence_id' parameter, expected int64_param or string_param.");
}
