import protobuf from 'protobufjs';
import { Errors } from '../errors/errors.ts';
import { defineEntry, isFloatType, isIntegerType } from './scalar-types.ts';
import { modelConfigType } from './schema.ts';

type Json = Record<string, unknown>;

/**
 * Model configuration JSON as protobuf's JSON parser (Triton's JsonToModelConfig) accepts it,
 * brought to the form the rest of config/ reads: field names as written in the .proto or in
 * lowerCamelCase (`max_batch_size`, `maxBatchSize`), integers as numbers or decimal strings
 * (`"dims": ["4"]`, how protobuf JSON writes int64), enums by name or number, float fields
 * also as "NaN" / "Infinity". Out come proto field names, numbers and enum names; a name the
 * schema does not know is refused with its path.
 */
export function modelConfigFromProtobufJson(value: Json): Json {
  return message(value, modelConfigType(), '');
}

function message(value: Json, type: protobuf.Type, path: string): Json {
  const out: Json = {};
  for (const [key, item] of Object.entries(value)) {
    const field = type.fields[key] ?? type.fieldsArray.find((f) => protobuf.util.camelCase(f.name) === key);
    const where = path === '' ? key : `${path}.${key}`;
    if (!field) throw Errors.invalidArg(`config field '${where}' is not a field of ${type.name}`);
    if (item === null) continue; // protobuf JSON: null means unset
    const resolved = field.resolve().resolvedType;
    let converted: unknown;
    if (field instanceof protobuf.MapField) {
      if (typeof item !== 'object' || Array.isArray(item)) throw Errors.invalidArg(`config field '${where}' must be an object`);
      converted = {};
      for (const [k, v] of Object.entries(item as Json)) defineEntry(converted as Json, k, element(v, field, resolved, `${where}.${k}`));
    } else if (field.repeated) {
      if (!Array.isArray(item)) throw Errors.invalidArg(`config field '${where}' must be a list`);
      converted = item.map((v, i) => element(v, field, resolved, `${where}[${i}]`));
    } else {
      converted = element(item, field, resolved, where);
    }
    defineEntry(out, field.name, converted);
  }
  return out;
}

function element(value: unknown, field: protobuf.Field, resolved: protobuf.Type | protobuf.Enum | null, where: string): unknown {
  if (resolved instanceof protobuf.Type) {
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      throw Errors.invalidArg(`config field '${where}' must be an object`);
    return message(value as Json, resolved, where);
  }
  if (resolved instanceof protobuf.Enum) {
    if (typeof value === 'number' && resolved.valuesById[value] !== undefined) return resolved.valuesById[value];
    return value;
  }
  if (isIntegerType(field.type) && typeof value === 'string' && /^-?\d+$/.test(value.trim())) return Number(value);
  if (isFloatType(field.type) && typeof value === 'string') {
    const special: Record<string, number> = { NaN: Number.NaN, Infinity: Infinity, '-Infinity': -Infinity };
    if (value in special) return special[value];
    if (value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  }
  return value;
}
