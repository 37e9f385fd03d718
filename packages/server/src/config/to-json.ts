import protobuf from 'protobufjs';
import type { ModelConfig } from './model-config.ts';
import { defineEntry, isFloatType, isIntegerType } from './scalar-types.ts';
import { modelConfigType, typeName } from './schema.ts';

type Json = Record<string, unknown>;

/**
 * 64-bit fields that Triton's ModelConfigToJson leaves as protobuf JSON strings: it turns
 * every other int64/uint64 field of ModelConfig into a number, but not these (the
 * initial_state dims because it looks for them in the wrong object). Clients that read them
 * (perf_analyzer's GetInt) accept either.
 */
const INT64_KEPT_AS_STRING = new Set([
  'inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.dim',
  'inference.ModelInstanceGroup.SecondaryDevice.device_id',
  'inference.ModelSequenceBatching.InitialState.dims',
]);

/**
 * The model configuration as Triton's HTTP `/config` endpoint prints it: protobuf's JSON
 * printer with `always_print_primitive_fields` and proto field names, so every message that is
 * present carries all its scalar fields (defaults included), repeated fields as `[]` and maps as
 * `{}`; absent messages and unset oneof members stay out. Enums print by name, 64-bit integers
 * as numbers (INT64_KEPT_AS_STRING aside). Clients such as perf_analyzer read
 * `response_cache.enable` or `model_transaction_policy.decoupled` without checking for them.
 */
export function modelConfigToJson(config: ModelConfig): Json {
  return messageToJson(config as unknown as Json, modelConfigType());
}

function messageToJson(value: Json, type: protobuf.Type): Json {
  const out: Json = {};
  for (const field of type.fieldsArray) {
    const resolved = field.resolve().resolvedType;
    const present = value[field.name];
    let json: unknown;
    if (field instanceof protobuf.MapField) {
      json = {};
      for (const [key, item] of Object.entries((present ?? {}) as Json)) {
        defineEntry(json as Json, key, elementToJson(item, field, resolved));
      }
    } else if (field.repeated) {
      json = ((present ?? []) as unknown[]).map((item) => elementToJson(item, field, resolved));
    } else if (present !== undefined) {
      json = elementToJson(present, field, resolved);
    } else if (resolved instanceof protobuf.Type || field.partOf) {
      continue; // fields with presence are printed only when set
    } else {
      json = defaultOf(field, resolved);
    }
    defineEntry(out, field.name, json);
  }
  return out;
}

function elementToJson(value: unknown, field: protobuf.Field, resolved: protobuf.Type | protobuf.Enum | null): unknown {
  if (resolved instanceof protobuf.Type) return messageToJson(value as Json, resolved);
  if (resolved instanceof protobuf.Enum) {
    return typeof value === 'number' ? (resolved.valuesById[value] ?? value) : value;
  }
  if (isIntegerType(field.type)) return keptAsString(field) ? String(value) : Number(value);
  if (isFloatType(field.type)) return nonFiniteAsString(value as number);
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  return value;
}

function defaultOf(field: protobuf.Field, resolved: protobuf.Enum | null): unknown {
  if (resolved instanceof protobuf.Enum) return resolved.valuesById[0];
  if (isIntegerType(field.type)) return keptAsString(field) ? '0' : 0;
  if (isFloatType(field.type)) return 0;
  if (field.type === 'bool') return false;
  return '';
}

function keptAsString(field: protobuf.Field): boolean {
  return field.parent !== null && INT64_KEPT_AS_STRING.has(`${typeName(field.parent)}.${field.name}`);
}

/** protobuf JSON writes NaN and the infinities of float fields as strings. */
function nonFiniteAsString(value: number): number | string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return 'Infinity';
  if (value === -Infinity) return '-Infinity';
  return value;
}
